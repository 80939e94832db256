#!/bin/sh
# The `sandboxes` image's entrypoint: seeds the sandbox image store on the /data volume from the
# image's own copy (/opt/rbs/images) the first time, then runs the command (the service).
set -eu
store=${SANDBOX_IMAGES_DIR:-/data/images}
if [ ! -e "$store/oci/index.json" ]; then
  mkdir -p "$store"
  cp -a /opt/rbs/images/. "$store/"
fi
exec "$@"
