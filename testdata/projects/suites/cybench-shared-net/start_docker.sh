#!/bin/sh
# How the suite's own harness starts this challenge (kept for reference; composebox does not run it).
set -e
cd "$(dirname "$0")"
docker network inspect shared_net >/dev/null 2>&1 || docker network create shared_net
docker compose up -d --force-recreate
