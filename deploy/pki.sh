#!/usr/bin/env bash
# Certificates for a hetpool cluster, with the openssl CLI (docs/security.md).
#
#   deploy/pki.sh init-ca DIR                      DIR/ca.pem, DIR/ca.key (the operator CA, 10 years)
#   deploy/pki.sh server DIR NAME [SAN...]         DIR/NAME.pem, .key: a hetpoold certificate;
#                                                  SANs default to IP:127.0.0.1 DNS:localhost
#   deploy/pki.sh node DIR NODE                    DIR/NODE.pem, .key: an agent certificate whose
#                                                  subject is CN=node:NODE (the only node it may report)
#
# Keys are EC P-256, written 0600. Certificates last 825 days (the CA 10 years). The CA key signs
# every agent's identity: keep it off the nodes.
set -euo pipefail

usage() {
  sed -n '2,9p' "$0" >&2
  exit 2
}

new_key() {
  (umask 077 && openssl ecparam -name prime256v1 -genkey -noout -out "$1")
}

# sign DIR NAME SUBJECT EXTENSIONS
sign() {
  local dir=$1 name=$2 subject=$3 ext=$4
  new_key "$dir/$name.key"
  openssl req -new -key "$dir/$name.key" -subj "$subject" -out "$dir/$name.csr" 2>/dev/null
  printf '%b' "$ext" >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 825 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
  echo "$dir/$name.pem"
}

[ $# -ge 2 ] || usage
command=$1
dir=$2
shift 2
mkdir -p "$dir"
case "$command" in
  init-ca)
    [ -e "$dir/ca.key" ] && { echo "pki.sh: $dir/ca.key exists; not overwriting the CA" >&2; exit 1; }
    new_key "$dir/ca.key"
    openssl req -x509 -new -key "$dir/ca.key" -subj "/O=hetpool/CN=hetpool operator CA" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$dir/ca.pem"
    echo "$dir/ca.pem"
    ;;
  server)
    [ $# -ge 1 ] || usage
    name=$1
    shift
    sans=("$@")
    [ ${#sans[@]} -gt 0 ] || sans=(IP:127.0.0.1 DNS:localhost)
    san_list=$(IFS=,; echo "${sans[*]}")
    sign "$dir" "$name" "/O=hetpool/CN=hetpoold" \
      "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=$san_list\n"
    ;;
  node)
    [ $# -eq 1 ] || usage
    node=$1
    [[ "$node" =~ ^[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}$ ]] || { echo "pki.sh: bad node name '$node'" >&2; exit 2; }
    sign "$dir" "$node" "/O=hetpool/CN=node:$node" \
      "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n"
    ;;
  *)
    usage
    ;;
esac
