# production.awk — the production-shaped stream (scenarios/production.sh): crawls
# of thousands of registered apps, and a registry that changes meanwhile.
#
#   LC_ALL=C awk -f gen.awk -f production.awk -v out=DIR -v seed=N \
#       -v reviews=0 -v app_stats=0 -v network_metrics=0 \
#       -v topic_reviews=T -v topic_app_stats=T -v topic_network_metrics=T \
#       -v apps=N -v crawls=N -v steps=N -v reviews_per_crawl=N \
#       -v new_apps=N -v soft=N -v hard=N -v nm=N [-v bad=PER_MILLE] [-v dup=PERCENT]
#
# gen.awk supplies the record values (review_value, app_stats_value,
# network_metrics_value, bad_record); with zero counts its own BEGIN writes
# nothing. This file's BEGIN then writes, in DIR:
#
# - stepNNNN.<topic>.kv (reviews, app-stats): the stream cut into steps,
#   crawls * steps of them, published one after the other; "KEY|VALUE" lines
#   as gen.awk writes them (unique keys p<n>, shuffled within the step,
#   DUP percent redelivered byte for byte, BAD per mille bad records);
# - nm.kv: the network-metrics records, published one every few hundred ms
#   while the steps run;
# - model.tsv: the model of every record (as gen.awk's);
# - keys.tsv: key, step (-1: network-metrics);
# - churn.tsv: package_name, fate (new, soft_deleted, hard_deleted,
#   reregistered): the apps the registry changes for during the run;
# - events.tsv: after_step, action (register, soft_delete, hard_delete),
#   package_name: the registry's changes, made once that step is published.
#
# A crawl is what the crawler publishes in one round: one app-stats message
# per app it knows (the APPS registered apps, the apps about to be
# registered, and the deleted ones: its list lags the registry), and
# REVIEWS_PER_CRAWL reviews, a third of them newer observations of reviews
# seen in the three crawls before. The apps the registry changes for get a
# review in about every other step, so each has messages published before and
# after each of its changes; their reviews are observed once (what happens to
# a review whose app is deleted between two observations is the deletion's
# business, not this model's).

function app_name(i) { return sprintf("com.rel.app%d", i) }

# The I-th churned app: spread over the registered ones, never twice.
function churn_pick(i,    k) {
    k = (i * 7919) % apps + 1
    while (k in churned) k = k % apps + 1
    churned[k] = 1
    return k
}

function stable_app(    k) {
    do k = rnd(apps) + 1; while (k in churned)
    return app_name(k)
}

function put(topic, step, value) { sn[topic, step]++; sv[topic, step, sn[topic, step]] = value }

# One line of a .kv file and its model (redeliveries and bad records as
# gen.awk's emit makes them).
function record(topic, file, step, value,    copies, c, key, v) {
    copies = 1
    if (rnd(100) < dup) copies = rnd(4) == 0 ? 3 : 2
    for (c = 0; c < copies; c++) {
        key = "p" (++seq)
        printf "%s|%s\n", key, value >file
        printf "%s\t%s\tgood\t\t%s\n", key, topic, value >model
        printf "%s\t%d\n", key, step >keys
    }
    if (rnd(1000) < bad) {
        v = bad_record(topic)
        key = "p" (++seq)
        printf "%s|%s\n", key, v >file
        printf "%s\t%s\tbad\t%s\t\n", key, topic, bad_type >model
        printf "%s\t%d\n", key, step >keys
    }
}

function emit_step(topic, step,    n, i, j, t, file) {
    n = sn[topic, step]
    file = sprintf("%s/step%04d.%s.kv", out, step, topic)
    printf "" >file
    for (i = n; i > 1; i--) {
        j = 1 + rnd(i)
        t = sv[topic, step, i]; sv[topic, step, i] = sv[topic, step, j]; sv[topic, step, j] = t
    }
    for (i = 1; i <= n; i++) {
        record(topic, file, step, sv[topic, step, i])
        delete sv[topic, step, i]
    }
    delete sn[topic, step]
    close(file)
}

BEGIN {
    if (bad == "") bad = 1
    if (dup == "") dup = 2
    keys = out "/keys.tsv"
    printf "" >keys
    churn_file = out "/churn.tsv"
    events = out "/events.tsv"
    printf "" >churn_file
    printf "" >events
    S = crawls * steps
    # The churned apps and their changes, spread over the run: never after
    # the last step, so that every change is followed by published messages.
    n_churn = 0
    for (i = 0; i < new_apps; i++) {
        pkg = sprintf("com.rel.new%d", i + 1)
        churn_app[++n_churn] = pkg
        printf "%s\tnew\n", pkg >churn_file
        printf "%d\tregister\t%s\n", 1 + int(i * (S - 3) / new_apps), pkg >events
    }
    for (i = 0; i < soft; i++) {
        pkg = app_name(churn_pick(n_churn))
        churn_app[++n_churn] = pkg
        printf "%s\tsoft_deleted\n", pkg >churn_file
        printf "%d\tsoft_delete\t%s\n", 1 + int((i + 0.5) * (S - 3) / soft), pkg >events
    }
    for (i = 0; i < hard; i++) {
        pkg = app_name(churn_pick(n_churn))
        churn_app[++n_churn] = pkg
        d = 1 + int(i * (S - 4) / hard)
        printf "%s\t%s\n", pkg, (i % 2 == 0 ? "reregistered" : "hard_deleted") >churn_file
        printf "%d\thard_delete\t%s\n", d, pkg >events
        # Every other one comes back: the same package_name, a new id.
        if (i % 2 == 0) printf "%d\tregister\t%s\n", d + 2, pkg >events
    }
    close(churn_file)
    close(events)

    # The crawler's list: every registered app and every churned one.
    n_list = 0
    for (i = 1; i <= apps; i++) list[++n_list] = app_name(i)
    for (i = 1; i <= new_apps; i++) list[++n_list] = sprintf("com.rel.new%d", i)

    id = 0
    churn_id = 50000000
    for (c = 0; c < crawls; c++) {
        # This crawl's app-stats, in a random order over its steps.
        for (i = n_list; i > 1; i--) {
            j = 1 + rnd(i)
            t = list[i]; list[i] = list[j]; list[j] = t
        }
        for (i = 1; i <= n_list; i++)
            put(topic_app_stats, c * steps + int((i - 1) * steps / n_list), app_stats_value(list[i], c, ++obs))
        # Reviews: new ones, and newer observations of the last three
        # crawls' (at most one observation of a review per crawl, so that
        # observations are ordered like crawls; never a tie).
        first_id[c] = id + 1
        lo = first_id[c >= 3 ? c - 3 : 0]
        for (i = 0; i < reviews_per_crawl; i++) {
            step = c * steps + rnd(steps)
            r = 0
            if (c > 0 && rnd(3) == 0) {
                r = lo + rnd(first_id[c] - lo)
                if (rv_last[r] == c) r = 0
            }
            if (r == 0) {
                r = ++id
                rv_pkg[r] = stable_app()
                rv_c0[r] = c
            }
            rv_last[r] = c
            put(topic_reviews, step, review_value(r, ++obs, c - rv_c0[r], rv_pkg[r]))
        }
        for (s = c * steps; s < (c + 1) * steps; s++) {
            for (k = 1; k <= n_churn; k++)
                if (rnd(2) == 0) put(topic_reviews, s, review_value(++churn_id, ++obs, 0, churn_app[k]))
            emit_step(topic_app_stats, s)
            emit_step(topic_reviews, s)
        }
        # The next crawl observes again only the reviews of this one and
        # the two before.
        limit = c >= 2 ? first_id[c - 2] : 1
        for (r = freed + 1; r < limit; r++) {
            delete rv_pkg[r]; delete rv_c0[r]; delete rv_last[r]
        }
        if (limit - 1 > freed) freed = limit - 1
    }
    # Network-metrics: one in five of a churned app.
    file = out "/nm.kv"
    printf "" >file
    for (i = 0; i < nm; i++)
        record(topic_network_metrics, file, -1,
               network_metrics_value(rnd(5) == 0 ? churn_app[1 + rnd(n_churn)] : stable_app(), ++obs))
    close(file)
    close(model)
    close(keys)
}
