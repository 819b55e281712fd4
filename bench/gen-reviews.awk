# gen-reviews.awk — the benchmark's data: realistic `reviews` messages of about
# 500 bytes for `apps` registered apps (10,000 unless given, as production
# has), deterministic (fixed seed), one Kafka
# message per line as "KEY<TAB>JSON" (key = review_id), the form
# `kcat -P -K '\t'` reads and bench/bare_pg reads.
#
#   awk -v mode=apps [-v apps=10000] -f gen-reviews.awk      one line "package_name<TAB>name" per app
#   awk -v mode=reviews -v n=200000 [-v apps=10000] -f gen-reviews.awk
#   awk -v mode=recrawl [-v apps=10000] -f gen-reviews.awk REVIEWS   the next crawl of REVIEWS
#
# Every review_id is unique (the index is part of it), so a fresh ingest
# inserts every row and a replay skips every row (same last_synced_at). The
# next crawl (mode=recrawl, an hour later) re-observes every review, a third
# of them changed, and finds a tenth more: most of its rows are updates.
# About a third of the texts are Persian (multi-byte UTF-8), some reviews
# carry a developer reply, some timestamps are naive (the crawler library
# emits naive UTC), some optional fields are absent.
function rnd(k) { return int(rand() * k) }
function pick(arr, k) { return arr[1 + rnd(k)] }
# The first NV * NP (1,000) names are vendor.product; beyond them a number
# tells the editions apart (com.snapp.taxi3).
function edition(i) { return int(i / (NV * NP)) ? int(i / (NV * NP)) : "" }
function pkg(i) { return sprintf("com.%s.%s%s", vendor[1 + i % NV], product[1 + int(i / NV) % NP], edition(i)) }
function appname(i) { return sprintf("%s %s%s", cap(vendor[1 + i % NV]), cap(product[1 + int(i / NV) % NP]), edition(i) ? " " edition(i) : "") }
function cap(s) { return toupper(substr(s, 1, 1)) substr(s, 2) }
function ts(sec, naive,    d, h, m, s) {
    # seconds since 2026-10-01T00:00:00 (UTC), within October/November 2026
    d = int(sec / 86400); sec -= d * 86400
    h = int(sec / 3600); sec -= h * 3600
    m = int(sec / 60); s = sec - m * 60
    return sprintf("2026-%02d-%02dT%02d:%02d:%02d%s", d < 31 ? 10 : 11, d < 31 ? d + 1 : d - 30, h, m, s, naive ? "" : "Z")
}
function sentence_en(    s) {
    s = pick(en_open, NEO) " " pick(en_mid, NEM) " " pick(en_end, NEE)
    return s
}
function sentence_fa() { return pick(fa, NFA) }
function text(target, persian,    t) {
    t = persian ? sentence_fa() : sentence_en()
    while (length(t) < target) t = t " " (persian ? sentence_fa() : sentence_en())
    return t
}
function split_into(s, arr) { return split(s, arr, "|") }
# One review of an app, observed by the crawl of second CRAWL (seconds since
# 2026-10-01; the review is synced within 15 minutes of it), as "KEY<TAB>JSON"; I makes its review_id unique.
function review(i, crawl,    synced, app, persian, target, content, r, score, thumbs, reviewed, replied, id, line) {
    app = rnd(apps)
    persian = rnd(3) == 0
    # Review text: English sentences run ~80 chars, Persian ~50 chars
    # (~90 bytes); the total message averages about 500 bytes.
    target = persian ? 60 + rnd(130) : 100 + rnd(200)
    content = text(target, persian)
    r = rnd(100)
    score = r < 45 ? 5 : r < 60 ? 4 : r < 70 ? 3 : r < 78 ? 2 : 1
    r = rnd(100)
    thumbs = r < 60 ? 0 : r < 90 ? rnd(20) : r < 99 ? rnd(500) : rnd(20000)
    reviewed = rnd(58 * 86400)
    synced = crawl + rnd(900)
    id = sprintf("%08x-%04x-4%03x-%04x-%012x", rnd(2^31) * 2 + rnd(2), rnd(65536), rnd(4096), 32768 + rnd(16384), i)
    line = sprintf("{\"package_name\":\"%s\",\"review_id\":\"%s\",\"user_name\":\"%s %s\",\"content\":\"%s\",\"score\":%d,\"thumbs_up_count\":%d",
                   pkg(app), id, pick(first, NF1), pick(last, NL1), content, score, thumbs)
    if (rnd(10) > 0) line = line sprintf(",\"app_version\":\"%d.%d.%d\"", 1 + app % 9, rnd(30), rnd(10))
    line = line sprintf(",\"reviewed_at\":\"%s\"", ts(reviewed, rnd(2)))
    if (rnd(100) < 18) {
        replied = reviewed + 3600 + rnd(5 * 86400)
        if (replied > synced - 60) replied = synced - 60   # replied before this crawl saw it
        line = line sprintf(",\"reply_content\":\"%s\",\"replied_at\":\"%s\"", pick(reply, NRE), ts(replied, 0))
    } else if (rnd(3) == 0) {
        line = line ",\"reply_content\":null,\"replied_at\":null"
    }
    line = line sprintf(",\"last_synced_at\":\"%s\"}", ts(synced, 0))
    printf "%s\t%s\n", id, line
}
# The crawls: 2026-11-29 12:00, and the next, an hour later.
BEGIN {
    CRAWL1 = 59 * 86400 + 12 * 3600
    CRAWL2 = CRAWL1 + 3600
    srand(20261129)
    NV = split_into("digikala|snapp|divar|rubika|bale|eitaa|filimo|namava|tapsi|alibaba|torob|sheypoor|cafebazaar|myket|irancell|hamrahaval|bankmellat|blu|asanpardakht|zarinpal|balad|neshan|taaghche|fidibo|nobitex|okala|snappfood|jabama|anten|aparat|shad|soroush|igap|ayandeh|tejarat|sep|pasargad|saman|parsian|ghasedak", vendor)
    NP = split_into("app|android|lite|pro|shop|wallet|market|music|video|news|maps|taxi|food|bank|pay|chat|books|games|health|travel|mail|cloud|tv|weather|learn", product)
    if (apps == "") apps = 10000
    if (mode == "apps") {
        for (i = 0; i < apps; i++) printf "%s\t%s\n", pkg(i), appname(i)
        exit
    }
    if (n == "") n = 200000
    NF1 = split_into("Ali|Sara|Reza|Maryam|Mohammad|Zahra|Hossein|Fatemeh|Amir|Narges|John|Emma|Omid|Leila|Mehdi|Parisa|Hamid|Nazanin|David|Elham", first)
    NL1 = split_into("Ahmadi|Hosseini|Karimi|Rezaei|Moradi|Jafari|Smith|Mohammadi|Sadeghi|Rahimi|Kazemi|Ebrahimi|Brown|Ghasemi|Najafi|Heidari", last)
    NEO = split_into("The latest update|This app|Honestly the new version|Since last week the app|After the redesign the app|Compared to the old version it|For daily use the app|On my Samsung phone the app|Overall the service|The checkout page", en_open)
    NEM = split_into("works well most of the time|crashes when I open the settings screen|is much faster than before|keeps logging me out|drains the battery quickly|shows the wrong prices in the cart|has a clean and simple interface|fails to load images on mobile data|sends too many notifications|is missing the dark mode I asked for", en_mid)
    NEE = split_into("and I would recommend it.|please fix this as soon as possible.|but support never answered my ticket.|so I gave it fewer stars.|which is really annoying.|thanks to the developers.|and the search is still slow.|since the last Android update.|even after reinstalling it.|but payments fail sometimes.", en_end)
    NFA = split_into("برنامه خیلی خوبه ولی بعد از آپدیت آخر کند شده.|لطفا مشکل پرداخت را درست کنید، چند بار پول کم شد ولی سفارش ثبت نشد.|پشتیبانی عالی بود و سریع جواب دادند.|نسخه جدید مدام بسته می‌شود و اطلاعات حساب پاک شد.|رابط کاربری ساده و زیباست، ممنون از تیم توسعه.|نقشه‌ها دقیق نیستند و مسیر اشتباه نشان می‌دهد.|اعلان‌ها خیلی زیاد است، لطفا امکان خاموش کردن بگذارید.|بعد از ورود با شماره موبایل کد تایید نمی‌آید.", fa)
    NRE = split_into("Thank you for your feedback, we have forwarded it to our team.|Sorry for the trouble. Please update to the latest version and contact support@example.com if it persists.|We fixed this issue in version 5.2, please update.|با تشکر از نظر شما، مشکل در نسخه بعدی برطرف می‌شود.|لطفا از طریق پشتیبانی داخل برنامه با ما در ارتباط باشید.", reply)
    if (mode == "recrawl") {
        srand(20261130)
        fresh = 1000000 # the new reviews' indexes, beyond the first crawl's
    } else {
        for (i = 1; i <= n; i++) review(i, CRAWL1)
        exit
    }
}
# mode=recrawl: the next crawl of the first one's reviews (its lines, read):
# every review seen again an hour later; a third of them with more thumbs
# up or an edited text; after every tenth, a review never seen before.
{
    t = $0
    sub(/"last_synced_at":"[^"]*"/, "\"last_synced_at\":\"" ts(CRAWL2 + rnd(900), 0) "\"", t)
    r = rnd(6)
    if (r == 0) {
        match(t, /"thumbs_up_count":[0-9]+/)
        t = substr(t, 1, RSTART - 1) "\"thumbs_up_count\":" (substr(t, RSTART + 18, RLENGTH - 18) + 1 + rnd(5)) substr(t, RSTART + RLENGTH)
    } else if (r == 1) {
        sub(/","score":/, " (edited)\",\"score\":", t)
    }
    print t
    if (NR % 10 == 0) review(fresh++, CRAWL2)
}
