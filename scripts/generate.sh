#!/usr/bin/env bash
# Regenerates the committed code from Schemas/:
#   Swift: Debian's protoc + protoc-gen-swift built from the pinned swift-protobuf (Package.swift)
#   C:     Debian's protoc-c
# and records the digest of the schemas beside each, which the tests compare against Schemas/.
# With --check, generates into a temporary folder and fails when the committed code differs.
set -euo pipefail
cd "$(dirname "$0")/.."

swift_out=Sources/AccessoryWire/Generated
c_out=Sources/CAccessoryWire/Generated
check=false
[ "${1:-}" = "--check" ] && check=true

swift build -c release --product protoc-gen-swift >&2
plugin="$(swift build -c release --show-bin-path)/protoc-gen-swift"

protos=$(cd Schemas && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/swift" "$out/c"
(cd Schemas && protoc --plugin=protoc-gen-swift="$plugin" \
    --swift_opt=Visibility=Internal --swift_opt=FileNaming=PathToUnderscores \
    --swift_out="$out/swift" $protos)
(cd Schemas && protoc-c --c_out="$out/c" $protos)
digest=$(cd Schemas && sha256sum $protos)
echo "$digest" > "$out/swift/schemas.sha256"
echo "$digest" > "$out/c/schemas.sha256"

if $check; then
    diff -r "$out/swift" "$swift_out" && diff -r "$out/c" "$c_out" \
        || { echo "generated code is stale: run 'make generate' and commit the result" >&2; exit 1; }
    echo "generated code is up to date"
else
    rm -rf "$swift_out" "$c_out"
    mkdir -p "$swift_out" "$c_out"
    cp -R "$out/swift/." "$swift_out/"
    cp -R "$out/c/." "$c_out/"
    echo "regenerated $swift_out and $c_out"
fi
