#!/usr/bin/env bash
# Makes a throw-away certificate authority and certificates for local TLS, in DIR (default: ./certs):
#   ca.crt / ca.key            the CA (give ca.crt to every client: --ca-file)
#   server.crt / server.key    the broker's, for localhost and 127.0.0.1 (or the names given in SERVER_NAMES)
#   client.crt / client.key    a client certificate, for brokers that require one (require_certificate true)
# For testing and local use only: the keys are not protected and the CA signs whatever this script asks.
# Usage: make-certs.sh [DIR]        SERVER_NAMES="DNS:broker.lan,IP:192.168.1.10" make-certs.sh certs
set -euo pipefail
dir=${1:-certs}
names=${SERVER_NAMES:-DNS:localhost,IP:127.0.0.1}
days=${DAYS:-825}
mkdir -p "$dir"
cd "$dir"

openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=AudioAccessoryBridge local CA" \
    -keyout ca.key -out ca.crt 2>/dev/null

issue() {  # issue NAME SUBJECT EXTENSIONS
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf '%s\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" -sha256 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
issue server "/CN=${names%%,*}" "subjectAltName=$names
extendedKeyUsage=serverAuth"
issue client "/CN=accessory-bridge" "extendedKeyUsage=clientAuth"
rm -f ca.srl
chmod 600 ./*.key
echo "made $(pwd)/{ca,server,client}.{crt,key} for $names"
