#!/bin/sh
# Container health check: healthy when every enabled pipeline's heartbeat is
# fresh (storage-consumer health reads the same STORAGE_* environment).
exec "${HEALTHCHECK_BIN:-storage-consumer}" health
