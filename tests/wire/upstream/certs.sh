#!/bin/sh
# A test CA (DIR/ca.pem) and the upstream servers' certificate for every test name
# (DIR/server.pem, DIR/server.key), for web.py. usage: certs.sh DIR
set -e
cd "$1"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=boxrt-test-ca -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=allowed.test \
  -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:allowed.test,DNS:other.allowed.test,DNS:denied.test,DNS:rebind.allowed.test\n' > san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext \
  -out server.pem 2>/dev/null
