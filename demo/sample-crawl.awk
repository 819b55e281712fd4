# Generates a realistic sample crawl for the demo, one Kafka message per line
# as "TOPIC<TAB>KEY<TAB>JSON". Run with: awk -v wave=1 -v apps=12 -f sample-crawl.awk
#   wave 1: app-stats for every app, 2,400 reviews, 3 network-metrics, and a
#           handful of bad messages (malformed JSON, missing field, out of
#           range, an unregistered app, a camelCase message from before the
#           contract).
#   wave 2: the next hourly crawl: new app-stats rows, 600 reviews observed
#           again with more thumbs-up (updates), 300 re-sent unchanged
#           (skipped), 400 new reviews, and 2 more network-metrics.
function pkg(i) { return sprintf("com.example.app%02d", i) }
function ts(day, h, m, s) { return sprintf("2026-11-%02dT%02d:%02d:%02d", day, h, m, s) }
function review(id, app, thumbs, synced,    text) {
    text = sprintf("Review %d of %s: works well, but the %s screen is slow", id, pkg(app), (id % 2 ? "login" : "settings"))
    printf "reviews\tr-%06d\t{\"package_name\":\"%s\",\"review_id\":\"r-%06d\",\"user_name\":\"user %d\",\"content\":\"%s\",\"score\":%d,\"thumbs_up_count\":%d,\"app_version\":\"%d.%d.0\",\"reviewed_at\":\"%s\",\"last_synced_at\":\"%s\"}\n", \
        id, pkg(app), id, id, text, 1 + id % 5, thumbs, 1 + app % 4, id % 10, ts(20 + id % 9, id % 24, id % 60, id % 60), synced
}
function appstats(app, crawled) {
    printf "app-stats\t%s\t{\"package_name\":\"%s\",\"crawled_at\":\"%s\",\"title\":\"App %02d\",\"score\":%.2f,\"ratings_count\":%d,\"reviews_count\":%d,\"min_installs\":%d,\"real_installs\":%d,\"histogram\":[%d,%d,%d,%d,%d],\"price\":%s,\"is_free\":%s,\"version\":\"%d.0.%d\",\"app_updated_at\":\"2026-11-01T08:00:00Z\"}\n", \
        pkg(app), pkg(app), crawled, app, 3 + (app % 20) / 10, 1000 * app + wave, 400 * app, 10000 * app, 12345 * app, app, 2 * app, 3 * app, 4 * app, 5 * app, \
        (app % 3 ? "0" : "1.99"), (app % 3 ? "true" : "false"), app % 4, wave
}
function metrics(n, app) {
    printf "network-metrics\t%s\t{\"package_name\":\"%s\",\"analysis_id\":\"%08d-1f2e-4c3d-9a8b-%012d\",\"analyzed_at\":\"%s+03:30\",\"duration_seconds\":%.1f,\"total_packets\":%d,\"total_bytes\":%d,\"unique_hosts\":%d,\"dns_queries\":%d,\"tls_handshakes\":%d,\"avg_packet_size\":%.2f,\"protocols\":{\"tcp\":%d,\"udp\":%d,\"quic\":%d}}\n", \
        pkg(app), pkg(app), n, n, ts(29, 10 + n, 15, 0), 60 + n, 5000 * n, 3000000 * n, 20 + n, 40 + n, 12 + n, 600 + n / 10, 4000 * n, 800 * n, 200 * n
}
BEGIN {
    if (wave == 1) {
        for (a = 1; a <= apps; a++) appstats(a, ts(29, 12, 0, 0) "Z")
        for (i = 1; i <= 2400; i++) review(i, 1 + i % apps, i % 7, "2026-11-29T12:05:00Z")
        for (n = 1; n <= 3; n++) metrics(n, n)
        print "reviews\tbad-1\t{\"package_name\":\"com.example.app01\",\"review_id\":"
        print "reviews\tbad-2\t{\"package_name\":\"com.example.app01\",\"review_id\":\"r-bad-2\",\"score\":9,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}"
        print "reviews\tbad-3\t{\"package_name\":\"com.example.app01\",\"review_id\":\"r-bad-3\",\"score\":3,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}"
        print "reviews\tbad-4\t{\"appId\":\"com.example.app01\",\"reviewId\":\"gp:AOqpTOF\",\"score\":5,\"thumbsUpCount\":3,\"at\":\"2026-11-29 12:00:00\"}"
        print "app-stats\tbad-5\t{\"package_name\":\"com.example.app02\",\"crawled_at\":\"2026-02-30T12:00:00Z\"}"
        print "network-metrics\tbad-6\t{\"package_name\":\"com.unregistered.app\",\"analysis_id\":\"5b9e1c2a-0000-4000-8000-000000000001\",\"analyzed_at\":\"2026-11-29T12:00:00Z\",\"duration_seconds\":1,\"total_packets\":1,\"total_bytes\":1}"
    } else {
        for (a = 1; a <= apps; a++) appstats(a, ts(29, 13, 0, 0) "Z")
        for (i = 1; i <= 600; i++) review(i, 1 + i % apps, i % 7 + 10 + i % 5, "2026-11-29T13:05:00Z")
        for (i = 1001; i <= 1300; i++) review(i, 1 + i % apps, i % 7, "2026-11-29T12:05:00Z")
        for (i = 2401; i <= 2800; i++) review(i, 1 + i % apps, i % 7, "2026-11-29T13:05:00Z")
        for (n = 4; n <= 5; n++) metrics(n, n)
    }
}
