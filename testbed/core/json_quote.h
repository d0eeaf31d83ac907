/* json_quote.h - a string as a JSON string on a stdio stream, for the programs that print JSON
 * with stdio rather than core/common.c's line writer: pqs-timer / pqs-server --describe
 * (core/describe.c), pqs-linkemu and pqs-capture (through emulation/linkemu/cli.h). One escaping
 * rule for all of them: '"' and '\\' escaped, control bytes as \u00XX, the rest as it is (UTF-8
 * passes through). Header-only and libc-only, so the emulation's programs need no testbed object. */
#ifndef PQS_JSON_QUOTE_H
#define PQS_JSON_QUOTE_H

#include <stdio.h>

static inline void pqs_json_quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

#endif
