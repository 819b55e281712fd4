#include "formats/schemas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

format_schema_t *format_schema_new(int32_t id, const char *type, const char *text, size_t len)
{
    format_schema_t *s = calloc(1, sizeof *s);
    if (!s) abort();
    s->id = id;
    if (!type || !*type || strcmp(type, "AVRO") == 0) s->kind = SCHEMA_AVRO;
    else if (strcmp(type, "JSON") == 0) s->kind = SCHEMA_JSON;
    else if (strcmp(type, "PROTOBUF") == 0) s->kind = SCHEMA_PROTOBUF;
    else s->kind = SCHEMA_OTHER;
    if (s->kind == SCHEMA_AVRO) {
        char why[400];
        s->avro = avro_format_new(text, len, why, sizeof why);
        if (!s->avro && asprintf(&s->unusable, "%s", why) < 0) abort();
    }
    return s;
}

void format_schema_free(format_schema_t *s)
{
    if (!s) return;
    avro_format_free(s->avro);
    free(s->unusable);
    free(s);
}

int wire_header(const void *bytes, size_t len, int32_t *id)
{
    const unsigned char *b = bytes;
    if (len > 0 && b[0] != 0) return -2;
    if (len < WIRE_HEADER) return -1;
    *id = (int32_t)((uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | (uint32_t)b[4]);
    return 0;
}
