# Certificates for TLS to PostgreSQL (tests/integration/tls.sh, bench/run.sh),
# made with openssl into $CERTS. Sourced.

# A key and a certificate NAME for subject CN, signed by authority CA (or
# self-signed when CA is "self"), valid DAYS (0: expired a second later).
# Fails (status 1, openssl's words on stderr) if openssl does.
make_cert() { # name cn ca days [san]
    local name=$1 cn=$2 ca=$3 days=$4 san=${5:-} out
    out=$(openssl req -newkey rsa:2048 -nodes -keyout "$CERTS/$name.key" -out "$CERTS/$name.csr" \
        -subj "/CN=$cn" 2>&1) || { echo "# cannot make the key of $name: $out" >&2; return 1; }
    if [ "$ca" = self ]; then
        out=$(openssl x509 -req -in "$CERTS/$name.csr" -signkey "$CERTS/$name.key" -out "$CERTS/$name.crt" \
            -days "$days" -extfile <(printf 'basicConstraints=critical,CA:true\nkeyUsage=keyCertSign,cRLSign\n') 2>&1)
    else
        out=$(openssl x509 -req -in "$CERTS/$name.csr" -CA "$CERTS/$ca.crt" -CAkey "$CERTS/$ca.key" \
            -CAcreateserial -out "$CERTS/$name.crt" -days "$days" \
            ${san:+-extfile <(printf 'subjectAltName=%s\n' "$san")} 2>&1)
    fi || { echo "# cannot sign certificate $name: $out" >&2; return 1; }
    chmod 600 "$CERTS/$name.key"
}

# The certificate the PostgreSQL on 127.0.0.1:PORT presents, and how
# openssl judges it against the authority CA (a file): "FINGERPRINT CODE",
# CODE openssl's verify return code (0 verified, 10 expired, 20 or 21 not
# signed by CA). Nothing if no TLS handshake.
served_cert() { # port ca-file
    local out fp code
    out=$(openssl s_client -starttls postgres -connect "127.0.0.1:$1" -CAfile "$2" -showcerts </dev/null 2>/dev/null) || true
    fp=$(echo "$out" | openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2) || true
    code=$(echo "$out" | sed -nE 's/^ *Verify return code: ([0-9]+).*/\1/p' | tail -n 1) || true
    if [ -n "$fp" ]; then echo "$fp $code"; fi
}

cert_fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$1" | cut -d= -f2; } # file

# Have the PostgreSQL whose superuser conninfo is ROOT serve certificate NAME
# (copied with its key into DIR, the server's own directory, readable by its
# user) with CA's certificate for client certificates; reloads it, and
# returns once the server presents NAME (at most STALL_S, 30 s): a reload
# that failed keeps the old certificate, which would prove nothing.
serve_cert() { # root dir name [ca]
    cp "$CERTS/$3.crt" "$CERTS/$3.key" "$CERTS/${4:-ca}.crt" "$2/"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$2/$3.crt" "$2/$3.key" "$2/${4:-ca}.crt"
    psql "$1" -X -q -v ON_ERROR_STOP=1 \
        -c "ALTER SYSTEM SET ssl = on" -c "ALTER SYSTEM SET ssl_cert_file = '$2/$3.crt'" \
        -c "ALTER SYSTEM SET ssl_key_file = '$2/$3.key'" -c "ALTER SYSTEM SET ssl_ca_file = '$2/${4:-ca}.crt'" \
        -c "SELECT pg_reload_conf()" >/dev/null || return 1
    local want served end=$((SECONDS + ${STALL_S:-30}))
    want=$(cert_fingerprint "$CERTS/$3.crt") || return 1
    while [ "$SECONDS" -lt "$end" ]; do
        served=$(served_cert "$(cat "$2/port")" "$CERTS/${4:-ca}.crt")
        [ "${served%% *}" = "$want" ] && return 0
        sleep 0.1
    done
    echo "# the server does not present certificate $3 after the reload (it presents [${served%% *}])" >&2
    return 1
}

