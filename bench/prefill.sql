-- bench/prefill.sql — make bench-scale's tables as a month of crawling leaves
-- them, written by PostgreSQL itself (no Kafka, no service): :rows reviews
-- over the :apps registered apps, and :days days of hourly app_stats of every
-- app, before the crawls the benchmark measures (bench/scale.sh).
--
--   psql -v rows=N -v apps=A -v days=D -f bench/prefill.sql   (N >= 1)
--
-- The rows look like the crawls' (bench/gen-reviews.awk): review ids of the
-- same form, random in their first groups (so the crawls' keys land all over
-- the unique index, as a real crawl's do) and never one of the crawls' (their
-- last group starts at 10^10); texts of 60 to 300 characters, a third
-- Persian; a reply on about a fifth. The indexes and constraints are dropped
-- for the load and made again afterwards under the names and definitions the
-- migrations gave them (PostgreSQL's own bulk load: each index built once,
-- its leaves 90 % full as CREATE INDEX leaves them); the heap keeps the
-- table's fillfactor. The caller freezes and analyzes the result.
\set ON_ERROR_STOP 1
SET maintenance_work_mem = '1GB';
SET synchronous_commit = off;

ALTER TABLE reviews DROP CONSTRAINT reviews_application_id_fkey, DROP CONSTRAINT reviews_pkey,
    DROP CONSTRAINT reviews_review_id_key;
DROP INDEX reviews_application_id_idx;
INSERT INTO reviews (id, application_id, review_id, user_name, content, score, thumbs_up_count, app_version,
                     reviewed_at, reply_content, replied_at, first_seen_at, last_synced_at)
SELECT g, 1 + h1 % :apps,
       lpad(to_hex(h1), 8, '0') || '-' || lpad(to_hex(h2 % 65536), 4, '0') || '-4' || lpad(to_hex(h3 % 4096), 3, '0')
           || '-' || to_hex(32768 + h2 % 16384) || '-' || lpad(to_hex(10000000000 + g), 12, '0'),
       (ARRAY['Ali Ahmadi', 'Sara Karimi', 'Reza Smith', 'Maryam Rezaei', 'Mohammad Jafari', 'Zahra Brown',
              'Hossein Kazemi', 'Fatemeh Najafi'])[1 + h2 % 8],
       CASE WHEN h3 % 3 = 0
            THEN substr('برنامه خیلی خوبه ولی بعد از آپدیت آخر کند شده. لطفا مشکل پرداخت را درست کنید، چند بار پول کم شد ولی سفارش ثبت نشد. پشتیبانی عالی بود و سریع جواب دادند. نسخه جدید مدام بسته می‌شود و اطلاعات حساب پاک شد.',
                        1 + h1 % 20, 60 + h2 % 130)
            ELSE substr('The latest update works well most of the time and I would recommend it. Since last week the app keeps logging me out, please fix this as soon as possible. Compared to the old version it is much faster than before but payments fail sometimes. On my Samsung phone the app drains the battery quickly since the last Android update.',
                        1 + h1 % 20, 100 + h2 % 200)
       END,
       CASE WHEN h1 % 100 < 45 THEN 5 WHEN h1 % 100 < 60 THEN 4 WHEN h1 % 100 < 70 THEN 3 WHEN h1 % 100 < 78 THEN 2 ELSE 1 END,
       CASE WHEN h2 % 100 < 60 THEN 0 ELSE h3 % 500 END,
       CASE WHEN h3 % 10 > 0 THEN (1 + h1 % 9) || '.' || h2 % 30 || '.' || h3 % 10 END,
       synced - make_interval(secs => 3600 + h2 % (58 * 86400)),
       CASE WHEN h3 % 100 < 18 THEN 'Thank you for your feedback, we have forwarded it to our team.' END,
       CASE WHEN h3 % 100 < 18 THEN synced - make_interval(secs => 60 + h1 % 3000) END,
       synced - make_interval(secs => h3 % (20 * 86400)),
       synced
FROM generate_series(1, :rows) AS g,
     -- three independent 31-bit hashes of the row's number
     LATERAL (SELECT hashint8(g) & 2147483647 AS h1, hashint8(-g) & 2147483647 AS h2,
                     hashint8(g + 4000000000) & 2147483647 AS h3) AS hs,
     -- synced within the 30 days before the first measured crawl (2026-11-29 12:00 UTC)
     LATERAL (SELECT timestamptz '2026-11-29 12:00:00+00' - make_interval(secs => 3600 + h1 % (30 * 86400)) AS synced) AS s;
SELECT setval('reviews_id_seq', :rows);
ALTER TABLE reviews ADD CONSTRAINT reviews_pkey PRIMARY KEY (id);
ALTER TABLE reviews ADD CONSTRAINT reviews_review_id_key UNIQUE (review_id);
CREATE INDEX reviews_application_id_idx ON reviews (application_id);
ALTER TABLE reviews ADD CONSTRAINT reviews_application_id_fkey FOREIGN KEY (application_id)
    REFERENCES apps_registry_application (id);

-- :days days of hourly crawls of every app, the last an hour before the first
-- measured crawl.
ALTER TABLE app_stats DROP CONSTRAINT app_stats_application_id_fkey, DROP CONSTRAINT app_stats_pkey,
    DROP CONSTRAINT app_stats_application_crawled_key;
DROP INDEX app_stats_application_id_idx;
INSERT INTO app_stats (application_id, crawled_at, title, score, ratings_count, reviews_count, min_installs,
                       real_installs, histogram, price, is_free, version, app_updated_at, ingested_at)
SELECT a, at, 'App ' || a, 3.5 + (a % 15) / 10.0 + hour % 7 / 1000.0, 1000 * a + hour, 300 * a + hour / 2,
       CASE WHEN a % 3 = 0 THEN 1000000 ELSE 100000 END, 150000 + 37 * a + hour,
       ARRAY[10 * a, 5 * a, 8 * a, 20 * a, 60 * a + hour]::bigint[], CASE WHEN a % 10 = 0 THEN 1.99 ELSE 0 END,
       a % 10 <> 0, (1 + a % 9) || '.' || hour / 240 || '.0', at - interval '3 days', at + interval '2 seconds'
FROM generate_series(1, :days * 24) AS hour,
     generate_series(1, :apps) AS a,
     LATERAL (SELECT timestamptz '2026-11-29 11:00:00+00' - make_interval(hours => hour - 1) AS at) AS t;
ALTER TABLE app_stats ADD CONSTRAINT app_stats_pkey PRIMARY KEY (id);
ALTER TABLE app_stats ADD CONSTRAINT app_stats_application_crawled_key UNIQUE (application_id, crawled_at);
CREATE INDEX app_stats_application_id_idx ON app_stats (application_id);
ALTER TABLE app_stats ADD CONSTRAINT app_stats_application_id_fkey FOREIGN KEY (application_id)
    REFERENCES apps_registry_application (id);
