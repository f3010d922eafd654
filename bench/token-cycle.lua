-- wrk script for `npm run bench -- --jwks`: every request GETs wrk's URL with the next bearer token
-- of the file named by the first argument (one token a line), in the file's order and round again
-- from its start, beginning after the line the second argument counts to (0: from the first line;
-- wrk asks for one request before it sends any and drops it, so the first sent is one line later).
-- In order, not at random: with more tokens than the gateway remembers, each comes back only after
-- it was forgotten, so every request has its signature checked.
local requests = {}
local next_request

function init(args)
  for token in io.lines(args[1]) do
    requests[#requests + 1] = wrk.format(nil, nil, { Authorization = "Bearer " .. token })
  end
  next_request = tonumber(args[2]) % #requests + 1
end

function request()
  local this = requests[next_request]
  next_request = next_request % #requests + 1
  return this
end
