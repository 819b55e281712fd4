#!/usr/bin/env bash
# The status page at GET / of STORAGE_METRICS_ADDR (DESIGN.md: Status
# page), loaded in a real browser (Debian's chromium, headless) while the
# service runs, and checked against the database and the broker. The
# screenshot is kept in BUILD/test-artifacts/.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

ARTIFACTS=$BUILD/test-artifacts
mkdir -p "$ARTIFACTS"

APP=com.status
PASSWORD=pw-Status-9c41e
PAYLOAD_MARK=payload-mark-5d20a

# chromium, headless, with a profile of its own in the work directory
# (--no-sandbox: the tests may run as root). It can take seconds to start.
browser() { # args...
    timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$WORK/chromium-profile" --no-first-run "$@" 2>>"$WORK/chromium.log"
}

# The page's text between the tags of the element with id ID in DOM.
element() { # dom id
    grep -o "id=\"$2\">[^<]*<" <<<"$1" | head -n1 | sed -E 's/^[^>]*>//; s/<$//'
}

# The second cell of table row ID in DOM.
row_value() { # dom id: the row's last cell
    grep -oE "<tr id=\"$2\">(<td>[^<]*</td>)+" <<<"$1" | head -n1 | sed -E 's#.*<td>([^<]*)</td>$#\1#'
}

# Wait until the page (fetched without a browser) contains TEXT, at most
# SECONDS more than STALL_S (what the service does first: the dead letter
# counts are read every 5 s).
wait_for_page() { # port text [seconds (0)]
    local deadline=$((SECONDS + ${3:-0} + STALL_S))
    until http_get "$1" / | grep -qF -- "$2"; do
        [ "$SECONDS" -lt "$deadline" ] || fail "the page never showed [$2]: $(http_get "$1" / | tail -n 40)"
        sleep 0.5
    done
}

test_status_page_in_a_browser_matches_the_database_and_the_broker() {
    begin_test status_browser
    register_apps "$APP"
    local port dom group p hw committed expected n
    port=$(free_port)
    group=$(group_of reviews)
    for i in 1 2 3 4 5 6; do
        echo "{\"package_name\":\"$APP\",\"review_id\":\"s$i\",\"score\":3,\"thumbs_up_count\":$i,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}"
    done | produce "$TOPIC_REVIEWS" -p 0
    printf '%s\n' "not json $PAYLOAD_MARK" "{\"oops\": \"$PAYLOAD_MARK\"" | produce "$TOPIC_REVIEWS" -p 1
    echo "{\"package_name\":\"com.unknown\",\"review_id\":\"$PAYLOAD_MARK\",\"score\":3,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}" |
        produce "$TOPIC_REVIEWS" -p 2
    # A password in the connection string (trust authentication ignores it)
    # must never reach the page.
    svc_start status STORAGE_PIPELINES=reviews,app-stats STORAGE_METRICS_ADDR="127.0.0.1:$port" \
        STORAGE_DATABASE_URL="$DB password=$PASSWORD"
    wait_for_sql "SELECT count(*) FROM reviews" 6
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 3
    wait_all_committed "$group" "$TOPIC_REVIEWS"
    wait_for_page "$port" 'id="dl-reviews-total">3<'

    dom=$(browser --dump-dom "http://127.0.0.1:$port/")
    echo "$dom" >"$ARTIFACTS/status-page.html"
    browser --screenshot="$ARTIFACTS/status-page.png" --window-size=1000,1600 "http://127.0.0.1:$port/" >/dev/null
    [ -s "$ARTIFACTS/status-page.png" ] || fail "no screenshot in $ARTIFACTS"
    assert_eq "PNG" "$(head -c 4 "$ARTIFACTS/status-page.png" | tail -c 3)" "the screenshot is a PNG"

    assert_contains "$dom" "<title>storage-consumer status</title>"
    assert_contains "$dom" 'http-equiv="refresh"'
    assert_eq "consuming" "$(element "$dom" state-reviews)" "state of reviews"
    assert_eq "consuming" "$(element "$dom" state-app-stats)" "state of app-stats"
    assert_eq "" "$(element "$dom" state-network-metrics)" "a pipeline not enabled is not shown"
    # Partitions and committed lag, as the broker says.
    assert_eq 3 "$(element "$dom" owned-reviews)" "partitions owned"
    for p in 0 1 2; do
        hw=$(high_watermark "$TOPIC_REVIEWS" "$p")
        committed=$(broker_committed "$group" "$TOPIC_REVIEWS" "$p")
        assert_eq "$((hw - committed))" "$(row_value "$dom" "lag-reviews-$TOPIC_REVIEWS-$p")" "committed lag of partition $p"
    done
    # Throughput: every record the broker holds was processed this minute.
    expected=0
    for p in 0 1 2; do expected=$((expected + $(high_watermark "$TOPIC_REVIEWS" "$p"))); done
    assert_eq "$expected" "$(element "$dom" throughput-reviews)" "records processed"
    assert_contains "$dom" "<polyline points=" "the throughput chart"
    # Unresolved dead letters by reason, as the database counts them.
    while IFS='|' read -r type n; do
        assert_eq "$n" "$(row_value "$dom" "dl-reviews-$type")" "dead letters $type"
    done < <(sql "SELECT error_type, count(*) FROM dead_letter_events WHERE resolved_at IS NULL GROUP BY error_type")
    assert_eq 3 "$(element "$dom" dl-reviews-total)" "unresolved dead letters"
    assert_contains "$dom" "storage-consumer dead-letters list --pipeline reviews"
    assert_eq "none" "$(element "$dom" error-reviews)" "no error yet"
    assert_contains "$(element "$dom" version)" "." "the version"
    # Counts and reasons only.
    case "$dom" in *"$PASSWORD"* | *"$PAYLOAD_MARK"* | *"password="*) fail "the page shows a secret or a payload" ;; esac
    case "$(http_get "$port" /)" in *"$PASSWORD"* | *"$PAYLOAD_MARK"*) fail "the HTML holds a secret or a payload" ;; esac

    # Resolving dead letters shows on the page once the pipeline reads
    # them again (every 5 s).
    n=$(env STORAGE_DATABASE_URL="$DB" "$BIN" dead-letters resolve --type invalid_json --note "seen" 2>&1) ||
        fail "resolve: $n"
    wait_for_page "$port" 'id="dl-reviews-total">1<' 5
    assert_eq 0 "$(svc_stop status)" "exit code"
}

# A connection PostgreSQL dropped is the pipeline's last error, with its
# time, while the pipeline goes on.
test_status_page_shows_the_last_error_with_its_time() {
    begin_test status_error
    register_apps "$APP"
    local port page
    port=$(free_port)
    svc_start error STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_page "$port" 'id="state-reviews">consuming<'
    wait_for_page "$port" 'id="error-reviews">none<'
    # The idle pipeline's next ping meets the dropped connection: the
    # service's own session, terminated.
    assert_eq 1 "$(sql "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
                        WHERE datname = current_database() AND application_name = 'storage-consumer'")"         "the service's sessions terminated"
    wait_for_page "$port" 'PostgreSQL does not answer'
    page=$(browser --dump-dom "http://127.0.0.1:$port/")
    assert_contains "$page" 'id="error-reviews"><time>'"$(date -u +%Y-%m-%d)" "the error's date"
    assert_contains "$page" "PostgreSQL does not answer" "the error's text"
    # The pipeline goes on: a review is stored on a new connection, and
    # the page still shows the last error.
    echo "{\"package_name\":\"$APP\",\"review_id\":\"after\",\"score\":3,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}" |
        produce "$TOPIC_REVIEWS" -p 0
    wait_for_sql "SELECT count(*) FROM reviews WHERE review_id = 'after'" 1
    assert_contains "$(http_get "$port" /)" "PostgreSQL does not answer" "the last error, after the pipeline stored again"
    assert_eq 0 "$(svc_stop error)" "exit code"
}

run_tests
