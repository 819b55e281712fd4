#!/usr/bin/env bash
# PostgreSQL over TLS (docs/OPERATIONS.md: Deploy): sslmode=verify-full with a
# certificate authority the suite makes (openssl) and a client certificate
# the server requires (clientcert=verify-full), a backlog stored through the
# non-blocking connection and COPY paths over TLS, and the certificate
# faults an operator meets, refused at start naming the problem: a server
# certificate of another authority, an expired one, and one the trusted
# authority issued for another host name (which only verify-full refuses:
# verify-ca would accept it).
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.tls
CERTS=$WORK/certs
mkdir -p "$CERTS"

. "$TOP/tests/support/certs.sh"

# No certificate, no suite: every test needs them.
make_cert ca "storage-consumer test CA" self 2 &&
    make_cert other-ca "another CA" self 2 &&
    make_cert server localhost ca 2 "DNS:localhost,IP:127.0.0.1" &&
    make_cert foreign localhost other-ca 2 "DNS:localhost,IP:127.0.0.1" &&
    make_cert expired localhost ca 0 "DNS:localhost,IP:127.0.0.1" &&
    make_cert elsewhere elsewhere.example ca 2 "DNS:elsewhere.example" &&
    make_cert client postgres ca 2 || exit 1

# pg_hba: TLS with a verified client certificate on TCP; the Unix socket
# stays for the suite.
printf 'local all all trust\nhostssl all all 127.0.0.1/32 trust clientcert=verify-full\n' >"$PG_DIR/data/pg_hba.conf"
[ "$(id -u)" -eq 0 ] && chown postgres: "$PG_DIR/data/pg_hba.conf"

# Serve certificate NAME (server, foreign, expired or elsewhere).
serve() { serve_cert "$(pg_root)" "$PG_DIR" "$1"; }

# The test's database over TLS, verified both ways.
tls_db() { # dbname
    echo "host=localhost port=$(cat "$PG_DIR/port") dbname=$1 user=postgres sslmode=verify-full sslrootcert=$CERTS/ca.crt sslcert=$CERTS/client.crt sslkey=$CERTS/client.key"
}

test_a_backlog_is_stored_over_tls_with_both_certificates_verified() {
    serve server
    begin_test tls_backlog
    DB=$(tls_db test_tls_backlog)
    export DB
    register_apps "$APP"
    gen_reviews 1 20000 t | produce "$TOPIC_REVIEWS"
    start_service tls STORAGE_PIPELINES=reviews
    wait_for_log tls '\[reviews\] batch size=' 1 60
    # The service's own sessions are TLS, with the client certificate.
    assert_eq "true|/CN=postgres" "$(sql "SELECT DISTINCT s.ssl || '|' || s.client_dn FROM pg_stat_ssl s
                                         JOIN pg_stat_activity a USING (pid)
                                         WHERE a.application_name = 'storage-consumer'")" \
        "the service's sessions: TLS, client certificate"
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 120
    assert_eq 20000 "$(sql "SELECT count(*) FROM reviews")" "reviews stored"
    assert_eq 20000 "$(batch_sum tls reviews inserted)" "counted inserted"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" tls
    stop_clean tls
}

# Start the service against a server presenting certificate NAME: it must
# exit 1 before any pipeline starts, saying why. First, that the server
# presents NAME and that openssl refuses it against the suite's authority
# for the reason the test is about (its verify return code: libpq's message
# is the same for every reason).
expect_refused_at_start() { # name test expected-text verify-codes
    serve "$1"
    local served
    served=$(served_cert "$(cat "$PG_DIR/port")" "$CERTS/ca.crt")
    assert_eq "$(cert_fingerprint "$CERTS/$1.crt")" "${served%% *}" "the certificate the server presents"
    [[ " $4 " == *" ${served##* } "* ]] || fail "openssl's verify return code for $1: [${served##* }], expected one of [$4]"
    begin_test "$2"
    DB=$(tls_db postgres)
    export DB
    start_service refused STORAGE_PIPELINES=reviews
    assert_eq 1 "$(svc_wait refused 60)" "exit status against the $1 certificate"
    assert_contains "$(cat "$(svc_log refused)")" "$3" "the reason"
    assert_eq 0 "$(log_count refused 'batch size=')" "batches"
}

test_a_server_certificate_of_another_authority_is_refused_at_start() {
    # 20, 21: the issuer is not the authority the service trusts.
    expect_refused_at_start foreign tls_foreign "certificate verify failed" "20 21"
}

test_an_expired_server_certificate_is_refused_at_start() {
    # 10: signed by the authority, expired.
    expect_refused_at_start expired tls_expired "certificate verify failed" 10
}

# sslmode=verify-full checks the server's host name, not only its
# authority: a certificate the trusted authority issued for another host
# (elsewhere.example; the service connects to localhost) is refused. The
# suite's other certificates all name localhost or come from another
# authority, so without this test verify-ca would pass the suite.
test_a_server_certificate_of_the_authority_for_another_host_name_is_refused_at_start() {
    # Names elsewhere.example only, not localhost nor 127.0.0.1.
    assert_eq "Hostname localhost does NOT match certificate|IP 127.0.0.1 does NOT match certificate" \
        "$(openssl x509 -noout -checkhost localhost -in "$CERTS/elsewhere.crt")|$(openssl x509 -noout -checkip 127.0.0.1 -in "$CERTS/elsewhere.crt")" \
        "the host names of the elsewhere certificate"
    # 0: signed by the authority the service trusts, valid: only its host
    # name is wrong.
    expect_refused_at_start elsewhere tls_elsewhere \
        'server certificate for "elsewhere.example" does not match host name "localhost"' 0
}

run_tests
