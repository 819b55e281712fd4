#!/bin/sh
# Container health check: healthy when every enabled pipeline runs with a
# fresh heartbeat (storage-consumer health reads the same STORAGE_*
# environment).
exec "${HEALTHCHECK_BIN:-storage-consumer}" health
