# gen.awk — the published stream of one reliability scenario, and its model.
#
#   LC_ALL=C awk -f gen.awk -v out=DIR -v seed=N -v reviews=N -v app_stats=N \
#       -v network_metrics=N -v topic_reviews=T -v topic_app_stats=T \
#       -v topic_network_metrics=T -v apps=N [-v bad=PER_MILLE] [-v dup=PERCENT] \
#       [-v single=1] [-v pad=BYTES] [-v base=N]
#
# Writes, per topic, DIR/<topic>.kv: one record per line, "KEY|VALUE", in the
# order it must be published (kcat -K'|'). Every key is unique ("p<n>"), so a
# record's key names it: consuming the topic afterwards (kcat -f '%p %o %k')
# maps each record to its partition and offset. The keys spread the records
# over the partitions, so observations of one review land on different
# partitions and are consumed in any order.
#
# DIR/model.tsv has one line per record: key, topic, kind (good|bad),
# error_type (bad records: the dead letter's error_type), and the JSON value
# of a good record (bad records: empty). The checker loads it with psql and
# lets SQL extract the expected columns from the JSON.
#
# What the stream holds:
# - reviews: 1 to 4 observations per review_id with distinct last_synced_at
#   (never a tie: ties would make the winner order-dependent), published in
#   a shuffled order, so a newer observation often comes first; timestamps in
#   Z, +03:30 and naive (UTC by policy) forms; text with characters COPY must
#   escape (backslash, tab, quotes, non-ASCII);
# - app-stats: one observation per (package, crawled_at);
# - network-metrics: one observation per analysis_id;
# - redeliveries: DUP percent of the records are published again, byte for
#   byte (a producer retry), under a key of their own;
# - bad records (BAD per mille, at random places): each kind of dead letter.
#
# A record's seq ("obs N" in reviews.content, app_stats.title, and the key)
# is what lets the checker tell which observation a stored row came from.

function rnd(n) { return int(rand() * n) }

function pick_app() { return sprintf("com.rel.app%d", rnd(apps) + 1) }

function ts(day, secs, micros, form,    h, m, s, b) {
    h = int(secs / 3600); m = int(secs / 60) % 60; s = secs % 60
    b = sprintf("2026-11-%02dT%02d:%02d:%02d.%06d", day, h, m, s, micros)
    if (form == 0) return b "Z"
    if (form == 1) return b                      # naive: UTC by policy
    # +03:30: the same instant written 3h30 later.
    secs += 12600
    if (secs >= 86400) { secs -= 86400; day++ }
    h = int(secs / 3600); m = int(secs / 60) % 60; s = secs % 60
    return sprintf("2026-11-%02dT%02d:%02d:%02d.%06d+03:30", day, h, m, s, micros)
}

# Text that COPY's text format must escape, and JSON must escape, kept
# within what every stage can hold.
function text(obs, extra,    t) {
    t = "obs " obs " «ünïcødé» back\\\\slash \\\"quoted\\\" tab\\there"
    if (extra != "") t = t " " extra
    return t
}

function padding(n,    s) {
    s = ""
    while (length(s) < n) s = s "lorem ipsum dolor sit amet "
    return substr(s, 1, n)
}

function add(topic, value) { n_rec[topic]++; rec[topic, n_rec[topic]] = value }

function review_value(id, obs, j, pkg,    day, secs, micros, v, reply) {
    day = 1 + j * 6 + rnd(5); secs = rnd(86400); micros = rnd(1000000)
    reply = ""
    if (rnd(3) == 0)
        reply = sprintf(",\"reply_content\":\"reply to obs %d\",\"replied_at\":\"%s\"", obs,
                        ts(day, secs, micros, 0))
    v = sprintf("{\"package_name\":\"%s\",\"review_id\":\"rv-%d\",\"user_name\":\"user %d\"," \
                "\"content\":\"%s\",\"score\":%d,\"thumbs_up_count\":%d,\"app_version\":\"1.%d\"," \
                "\"reviewed_at\":\"2026-10-%02dT08:00:00Z\"%s,\"last_synced_at\":\"%s\"}",
                pkg, id, id, text(obs, pad > 0 ? padding(pad) : ""), 1 + rnd(5), j * 10 + rnd(10), j,
                1 + id % 28, reply, ts(day, secs, micros, rnd(3)))
    return v
}

function app_stats_value(pkg, crawl, obs) {
    return sprintf("{\"package_name\":\"%s\",\"crawled_at\":\"%s\",\"title\":\"%s\",\"score\":%.2f," \
                   "\"ratings_count\":%d,\"reviews_count\":%d,\"min_installs\":%d,\"real_installs\":%d," \
                   "\"histogram\":[%d,%d,%d,%d,%d],\"price\":%s,\"is_free\":%s,\"version\":\"2.%d\"," \
                   "\"app_updated_at\":\"2026-10-01T00:00:00Z\",\"unknown_field\":{\"ignored\":[1,2]}}",
                   pkg, ts(1 + int(crawl / 24) % 28, (crawl % 24) * 3600, obs % 1000000, rnd(3)),
                   text(obs, ""), rnd(21) * 0.25, rnd(100000), rnd(5000), 1000 * rnd(100), rnd(1000000),
                   rnd(9), rnd(9), rnd(9), rnd(9), rnd(9), rnd(2) ? "0" : "1.99",
                   rnd(2) ? "true" : "false", crawl)
}

function network_metrics_value(pkg, obs) {
    return sprintf("{\"package_name\":\"%s\",\"analysis_id\":\"%08x-%04x-4%03x-8%03x-%012x\"," \
                   "\"analyzed_at\":\"%s\",\"duration_seconds\":%d.5,\"total_packets\":%d," \
                   "\"total_bytes\":%d,\"unique_hosts\":%d,\"dns_queries\":%d,\"tls_handshakes\":%d," \
                   "\"avg_packet_size\":%d.25,\"protocols\":{\"tcp\":%d,\"udp\":%d}}",
                   pkg, seed, rnd(65536), rnd(4096), rnd(4096), obs,
                   ts(1 + rnd(28), rnd(86400), rnd(1000000), rnd(3)), 1 + rnd(60), rnd(100000),
                   rnd(100000000), rnd(100), rnd(500), rnd(50), 40 + rnd(1400), rnd(5000), rnd(5000))
}

# A record that can never be stored, and the error_type it must get.
function bad_record(topic,    k, pkg) {
    k = rnd(8); pkg = pick_app()
    if (k == 0) { bad_type = "invalid_json"; return "{\"package_name\":\"" pkg "\",\"review_id\":\"trunc" }
    if (k == 1) { bad_type = "invalid_json"; return "[1,2,3]" }
    if (k == 2) { bad_type = "invalid_json"; return "{\"package_name\":\"" pkg "\",\"package_name\":\"" pkg "\"}" }
    if (k == 3) { bad_type = "missing_field"; return "{\"note\":\"no package_name\"}" }
    if (k == 4) { bad_type = "unregistered_app"; return unregistered(topic) }
    if (k == 5) { bad_type = "invalid_utf8"; return "{\"package_name\":\"" pkg "\",\"x\":\"\377\376\"}" }
    if (k == 6) { bad_type = "empty_payload"; return "" }
    bad_type = "invalid_field"
    return invalid_field(topic, pkg)
}

function unregistered(topic) {
    if (topic == topic_reviews)
        return "{\"package_name\":\"com.rel.unregistered\",\"review_id\":\"u-" rnd(1000000) "\",\"score\":3,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-10-01T00:00:00Z\",\"last_synced_at\":\"2026-11-01T00:00:00Z\"}"
    if (topic == topic_app_stats)
        return "{\"package_name\":\"com.rel.unregistered\",\"crawled_at\":\"2026-11-01T00:00:00Z\"}"
    return "{\"package_name\":\"com.rel.unregistered\",\"analysis_id\":\"00000000-0000-4000-8000-000000000000\",\"analyzed_at\":\"2026-11-01T00:00:00Z\",\"duration_seconds\":1,\"total_packets\":1,\"total_bytes\":1}"
}

function invalid_field(topic, pkg) {
    if (topic == topic_reviews)
        return "{\"package_name\":\"" pkg "\",\"review_id\":\"bad-score\",\"score\":9,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-10-01T00:00:00Z\",\"last_synced_at\":\"2026-11-01T00:00:00Z\"}"
    if (topic == topic_app_stats)
        return "{\"package_name\":\"" pkg "\",\"crawled_at\":\"2026-11-31T00:00:00Z\"}"
    return "{\"package_name\":\"" pkg "\",\"analysis_id\":\"not-a-uuid\",\"analyzed_at\":\"2026-11-01T00:00:00Z\",\"duration_seconds\":1,\"total_packets\":1,\"total_bytes\":1}"
}

# Publish TOPIC's records in a shuffled order, with redeliveries and bad
# records, and write the model.
function emit(topic,    n, i, j, t, key, v, file, copies, c) {
    n = n_rec[topic]
    if (n == 0) return
    for (i = n; i > 1; i--) {                      # Fisher-Yates
        j = 1 + rnd(i)
        t = rec[topic, i]; rec[topic, i] = rec[topic, j]; rec[topic, j] = t
    }
    file = out "/" topic ".kv"
    printf "" >file
    for (i = 1; i <= n; i++) {
        copies = 1
        if (rnd(100) < dup) copies = rnd(4) == 0 ? 3 : 2
        for (c = 0; c < copies; c++) {
            key = "p" (++seq)
            printf "%s|%s\n", key, rec[topic, i] >file
            printf "%s\t%s\tgood\t\t%s\n", key, topic, rec[topic, i] >model
        }
        if (rnd(1000) < bad) {
            v = bad_record(topic)
            key = "p" (++seq)
            printf "%s|%s\n", key, v >file
            printf "%s\t%s\tbad\t%s\t\n", key, topic, bad_type >model
        }
    }
    close(file)
}

BEGIN {
    srand(seed + 0)
    if (bad == "") bad = 10
    if (dup == "") dup = 5
    if (apps == "") apps = 8
    model = out "/model.tsv"
    printf "" >model
    # BASE shifts ids, observations and keys: a second stream for the same
    # topics (gen.awk run again) names nothing the first one did.
    obs = base + 0; seq = base + 0
    # Reviews: until REVIEWS records (before redeliveries and bad records).
    for (id = base + 1; n_rec[topic_reviews] < reviews + 0; id++) {
        k = single ? 1 : 1 + rnd(4)
        if (!single && rnd(2)) k = 1
        pkg = pick_app()
        for (j = 0; j < k; j++) add(topic_reviews, review_value(id, ++obs, j, pkg))
    }
    for (i = 0; i < app_stats + 0; i++)
        add(topic_app_stats, app_stats_value(sprintf("com.rel.app%d", i % apps + 1), int(i / apps), ++obs))
    for (i = 0; i < network_metrics + 0; i++)
        add(topic_network_metrics, network_metrics_value(pick_app(), ++obs))
    emit(topic_reviews)
    emit(topic_app_stats)
    emit(topic_network_metrics)
    close(model)
}
