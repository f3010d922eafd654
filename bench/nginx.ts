/**
 * nginx, Debian's package, as the peer the gateway is measured against: one worker process in front
 * of the same products-service, as a plain reverse proxy (keep-alive upstream connections) and with
 * `proxy_cache` (every 200 cached for a minute, whatever the service's Cache-Control says, as
 * someone putting nginx in front of the API to cache it would configure it).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { childrenOf, startServer, type Server } from './support.ts';

function config(directory: string, upstream: URL, ports: { plain: number; cached: number }): string {
  return `
worker_processes 1;
daemon off;
pid ${directory}/nginx.pid;
error_log ${directory}/error.log warn;
user root;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${directory}/client_body;
  proxy_temp_path ${directory}/proxy;
  fastcgi_temp_path ${directory}/fastcgi;
  uwsgi_temp_path ${directory}/uwsgi;
  scgi_temp_path ${directory}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 65s;
  upstream products {
    server ${upstream.host};
    keepalive 64;
  }
  proxy_cache_path ${directory}/cache levels=1:2 keys_zone=bench:10m max_size=64m inactive=10m use_temp_path=off;
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_set_header Host $host;
  server {
    listen 127.0.0.1:${ports.plain};
    location = /healthz { return 200 "ok"; }
    location / { proxy_pass http://products; }
  }
  server {
    listen 127.0.0.1:${ports.cached};
    location = /healthz { return 200 "ok"; }
    location / {
      proxy_pass http://products;
      proxy_cache bench;
      proxy_cache_valid 200 60s;
      proxy_ignore_headers Cache-Control Expires;
      proxy_cache_lock on;
      add_header X-Cache $upstream_cache_status;
    }
  }
}
`;
}

/** One nginx (master and worker, pinned with the other servers) serving both ports; `close` removes its files. */
export async function startNginx(upstream: string, ports: { plain: number; cached: number }): Promise<{ plain: Server; cached: Server; close(): Promise<void> }> {
  const directory = await mkdtemp(path.join(os.tmpdir(), 'bench-nginx-'));
  const file = path.join(directory, 'nginx.conf');
  await writeFile(file, config(directory, new URL(upstream), ports));
  const nginx = await startServer('nginx', '/usr/sbin/nginx', ['-p', directory, '-e', `${directory}/error.log`, '-c', file], {
    port: ports.plain,
    childPids: childrenOf,
  });
  const cached: Server = { ...nginx, name: 'nginx proxy_cache', url: `http://127.0.0.1:${ports.cached}` };
  return { plain: nginx, cached, close: () => rm(directory, { recursive: true, force: true }) };
}
