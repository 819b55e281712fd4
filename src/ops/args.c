#include "ops/args.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool args_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

bool args_option(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return false;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0') return false;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    return true;
}

int args_integer(const char *text, long long min, long long max, long long *out)
{
    char *end;
    if (!isdigit((unsigned char)text[0])) return -1;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}
