/* json_fast — the decoder's fast JSON reader: simdjson's DOM parser, for
 * ordinary documents only (src/core/json_value.h; DESIGN.md: Two parsers,
 * one outcome).
 *
 * simdjson validates UTF-8 (overlong forms and encoded surrogates
 * included), lone surrogates in \u escapes and unescaped control characters,
 * and keeps int64, uint64 and double apart. It does not catch a key given
 * twice, so every object of the document is scanned for one here. Anything
 * else out of the ordinary makes the reader decline, and the reference
 * reader decides. Built without exceptions: errors are simdjson's error
 * codes, and an allocation failure aborts. */
#include <simdjson.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "core/json_value.h"

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

/* One per thread: simdjson's parser keeps its buffers between documents. */
struct reader {
    simdjson::dom::parser parser;
    std::unique_ptr<uint8_t[]> padded; /* the record, copied with simdjson's padding */
    size_t padded_cap = 0;
    std::vector<jv_t> items;
    std::vector<jv_key_t> keys;
    std::vector<size_t> first_child; /* per wanted name: its children's start in items */
    std::vector<size_t> first_key;   /* per wanted name: its keys' start in keys */
};

thread_local reader tls;

/* The container an element of that type is (the caller checked its type). */
simdjson::dom::array as_array(element e)
{
    simdjson::dom::array a;
    if (e.get_array().get(a)) std::abort();
    return a;
}

simdjson::dom::object as_object(element e)
{
    simdjson::dom::object o;
    if (e.get_object().get(o)) std::abort();
    return o;
}

/* No key twice, none holding U+0000, at most JSON_FAST_MAX_KEYS per object,
 * no integer beyond int64, at any depth (simdjson bounds the depth). */
bool is_ordinary(element e)
{
    switch (e.type()) {
    case element_type::UINT64: return false;
    case element_type::ARRAY:
        for (element child : as_array(e))
            if (!is_ordinary(child)) return false;
        return true;
    case element_type::OBJECT: {
        simdjson::dom::object o = as_object(e);
        size_t i = 0;
        for (auto it = o.begin(); it != o.end(); ++it, ++i) {
            if (i == JSON_FAST_MAX_KEYS) return false;
            std::string_view key = it.key();
            if (key.find('\0') != std::string_view::npos) return false;
            for (auto prev = o.begin(); prev != it; ++prev)
                if (prev.key() == key) return false;
            if (!is_ordinary(it.value())) return false;
        }
        return true;
    }
    default: return true;
    }
}

/* A scalar's value, or a container's type and size (children are added by
 * the caller, one level down only). */
jv_t scalar(element e)
{
    jv_t v{};
    switch (e.type()) {
    case element_type::NULL_VALUE: v.type = JV_NULL; break;
    case element_type::BOOL:
        v.type = JV_BOOL;
        v.boolean = e.get_bool().value_unsafe();
        break;
    case element_type::INT64:
        v.type = JV_INT;
        v.integer = e.get_int64().value_unsafe();
        break;
    case element_type::DOUBLE:
        v.type = JV_REAL;
        v.real = e.get_double().value_unsafe();
        break;
    case element_type::STRING: {
        std::string_view s = e.get_string().value_unsafe();
        v.type = JV_STRING;
        v.str = s.data();
        v.len = s.size();
        break;
    }
    case element_type::ARRAY:
        v.type = JV_ARRAY;
        v.count = as_array(e).size();
        break;
    case element_type::OBJECT:
        v.type = JV_OBJECT;
        v.count = as_object(e).size();
        break;
    case element_type::UINT64: std::abort(); /* is_ordinary refused it */
    }
    return v;
}

/* Copy the record where simdjson may read SIMDJSON_PADDING bytes past it. */
const uint8_t *pad(reader &r, const void *data, size_t len)
{
    size_t need = len + simdjson::SIMDJSON_PADDING;
    if (need > r.padded_cap) {
        size_t cap = r.padded_cap ? r.padded_cap : 4096;
        while (cap < need) cap *= 2;
        r.padded.reset(new uint8_t[cap]);
        r.padded_cap = cap;
    }
    std::memcpy(r.padded.get(), data, len);
    std::memset(r.padded.get() + len, 0, simdjson::SIMDJSON_PADDING);
    return r.padded.get();
}

} // namespace

extern "C" bool json_fast_read(const void *data, size_t len, const jv_key_t *names, size_t n,
                               jv_t *out)
{
    if (len > JSON_FAST_MAX_BYTES) return false;
    reader &r = tls;
    element root;
    if (r.parser.parse(pad(r, data, len), len, false).get(root)) return false;
    if (root.type() != element_type::OBJECT || !is_ordinary(root)) return false;

    r.items.clear();
    r.keys.clear();
    r.first_child.assign(n, 0);
    r.first_key.assign(n, 0);
    for (size_t k = 0; k < n; k++) out[k] = jv_t{};
    size_t position = 0;
    for (auto member : as_object(root)) {
        size_t k = 0, at = position++;
        while (k < n && member.key != std::string_view(names[k].str, names[k].len)) k++;
        if (k == n) continue; /* unknown members are ignored (DESIGN.md: The message contract) */
        out[k] = scalar(member.value);
        out[k].member = at;
        r.first_child[k] = r.items.size();
        r.first_key[k] = r.keys.size();
        if (out[k].type == JV_ARRAY) {
            for (element child : as_array(member.value)) r.items.push_back(scalar(child));
        } else if (out[k].type == JV_OBJECT) {
            for (auto child : as_object(member.value)) {
                r.items.push_back(scalar(child.value));
                r.keys.push_back(jv_key_t{child.key.data(), child.key.size()});
            }
        }
        out[k].count = r.items.size() - r.first_child[k];
    }
    /* Children are pointed to once all are in place: the vectors may move
     * while they grow. */
    for (size_t k = 0; k < n; k++) {
        if (out[k].type != JV_ARRAY && out[k].type != JV_OBJECT) continue;
        out[k].items = r.items.data() + r.first_child[k];
        if (out[k].type == JV_OBJECT) out[k].keys = r.keys.data() + r.first_key[k];
    }
    return true;
}
