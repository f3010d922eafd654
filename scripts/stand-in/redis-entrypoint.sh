#!/bin/sh
# The entrypoint of the redis:7 stand-in (Redis from Debian), as the official image's: arguments
# alone are redis-server's, the server runs as the redis user in /data, and protected mode is off
# (the official image compiles it off; clients reach the server through a published port, from an
# address that is not loopback) unless a configuration file or argument says otherwise.
set -eu

case "$1" in -* | *.conf) set -- redis-server "$@" ;; esac
if [ "$1" = redis-server ]; then
  case " $* " in
    *' --protected-mode '* | *.conf' '*) ;;
    *) set -- "$@" --protected-mode no ;;
  esac
  exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"
