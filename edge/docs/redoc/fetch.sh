#!/usr/bin/env bash
# fetch.sh VERSION puts the standalone bundle of redoc@VERSION from npm, with
# its licenses, beside this script and pins it in redoc.pin: the version,
# the package's integrity (npm checks the tarball against it) and the
# bundle's SHA-256. go build embeds what is here, so the API reference page
# needs no network at run time; edge/docs's tests hold the bundle to the pin.
set -euo pipefail
version=${1:?usage: fetch.sh VERSION}
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --json "redoc@$version" >pack.json
integrity=$(node -p 'require("./pack.json")[0].integrity')
tar -xzf "redoc-$version.tgz"
cp package/bundles/redoc.standalone.js package/bundles/redoc.standalone.js.LICENSE.txt package/LICENSE "$dir/"
sum=$(sha256sum "$dir/redoc.standalone.js" | cut -d' ' -f1)
cat >"$dir/redoc.pin" <<PIN
# The Redoc standalone bundle embedded by edge/docs, from npm (make redoc).
version $version
integrity $integrity
sha256 $sum
PIN
echo "redoc $version: $sum"
