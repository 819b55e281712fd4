# Certificates for TLS to PostgreSQL (tests/integration/tls.sh, bench/run.sh),
# made with openssl into $CERTS. Sourced.

# A key and a certificate NAME for subject CN, signed by authority CA (or
# self-signed when CA is "self"), valid DAYS (0: expired a second later).
make_cert() { # name cn ca days [san]
    local name=$1 cn=$2 ca=$3 days=$4 san=${5:-}
    openssl req -newkey rsa:2048 -nodes -keyout "$CERTS/$name.key" -out "$CERTS/$name.csr" -subj "/CN=$cn" \
        2>/dev/null
    if [ "$ca" = self ]; then
        openssl x509 -req -in "$CERTS/$name.csr" -signkey "$CERTS/$name.key" -out "$CERTS/$name.crt" \
            -days "$days" -extfile <(printf 'basicConstraints=critical,CA:true\nkeyUsage=keyCertSign,cRLSign\n') \
            2>/dev/null
    else
        openssl x509 -req -in "$CERTS/$name.csr" -CA "$CERTS/$ca.crt" -CAkey "$CERTS/$ca.key" \
            -CAcreateserial -out "$CERTS/$name.crt" -days "$days" \
            ${san:+-extfile <(printf 'subjectAltName=%s\n' "$san")} 2>/dev/null
    fi
    chmod 600 "$CERTS/$name.key"
}

# Have the PostgreSQL whose superuser conninfo is ROOT serve certificate NAME
# (copied with its key into DIR, the server's own directory, readable by its
# user) with CA's certificate for client certificates; reloads it.
serve_cert() { # root dir name [ca]
    cp "$CERTS/$3.crt" "$CERTS/$3.key" "$CERTS/${4:-ca}.crt" "$2/"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$2/$3.crt" "$2/$3.key" "$2/${4:-ca}.crt"
    psql "$1" -X -q -v ON_ERROR_STOP=1 \
        -c "ALTER SYSTEM SET ssl = on" -c "ALTER SYSTEM SET ssl_cert_file = '$2/$3.crt'" \
        -c "ALTER SYSTEM SET ssl_key_file = '$2/$3.key'" -c "ALTER SYSTEM SET ssl_ca_file = '$2/${4:-ca}.crt'" \
        -c "SELECT pg_reload_conf()" >/dev/null
    sleep 0.5
}
