-- wrk script for `npm run bench -- --scale`: every request GETs a path picked at random from the
-- file named by the script's first argument (one path a line).
local paths = {}

function init(args)
  for line in io.lines(args[1]) do
    paths[#paths + 1] = line
  end
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end

function request()
  return wrk.format("GET", paths[math.random(#paths)])
end
