/* JSON parsing (RFC 8259, strict: no comments, no trailing commas, UTF-8
 * checked) into arena-allocated trees, and the writers. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 256, ARENA_BLOCK = 1 << 16 };

typedef struct arena_block {
    struct arena_block *next;
    size_t size, used;
    max_align_t data[];
} arena_block_t;

struct json_arena {
    arena_block_t *head; /* the block being filled; older ones after it */
};

json_arena_t *json_arena_new(void)
{
    return xcalloc(1, sizeof(json_arena_t));
}

void json_arena_reset(json_arena_t *a)
{
    if (!a->head) return;
    arena_block_t *keep = a->head, *b = keep->next;
    while (b) {
        arena_block_t *next = b->next;
        free(b);
        b = next;
    }
    keep->next = NULL;
    keep->used = 0;
}

void json_arena_free(json_arena_t *a)
{
    if (!a) return;
    json_arena_reset(a);
    free(a->head);
    free(a);
}

static void *arena_alloc(json_arena_t *a, size_t size)
{
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_block_t *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t want = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        arena_block_t *nb = xmalloc(sizeof *nb + want);
        nb->size = want;
        nb->used = 0;
        /* a big block goes behind the current one, which may still have room */
        if (b && want > ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
            nb->used = size;
            return nb->data;
        }
        nb->next = b;
        a->head = b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

void json_parser_init(json_parser_t *p, const char *text, size_t len, json_arena_t *arena)
{
    memset(p, 0, sizeof *p);
    p->text = text;
    p->len = len;
    p->arena = arena;
}

void json_parser_done(json_parser_t *p)
{
    free(p->items);
    free(p->members);
    p->items = NULL;
    p->members = NULL;
}

static int fail(json_parser_t *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(json_parser_t *p, size_t at, const char *fmt, ...)
{
    if (p->error[0]) return -1; /* the innermost reason counts */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof p->error, fmt, ap);
    va_end(ap);
    p->error_pos = at;
    return -1;
}

static void skip_ws(json_parser_t *p)
{
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

int json_peek(json_parser_t *p)
{
    skip_ws(p);
    return p->pos < p->len ? (unsigned char)p->text[p->pos] : -1;
}

static const char *describe_char(const json_parser_t *p, char *buf, size_t len)
{
    if (p->pos >= p->len) return "the end";
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, len, "'%c'", c);
    else snprintf(buf, len, "byte 0x%02x", c);
    return buf;
}

int json_expect(json_parser_t *p, char c)
{
    if (json_peek(p) == (unsigned char)c) {
        p->pos++;
        return 0;
    }
    char what[16];
    return fail(p, p->pos, "expected '%c', found %s", c, describe_char(p, what, sizeof what));
}

void json_position(const json_parser_t *p, size_t offset, long *line, long *column)
{
    long l = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < offset && i < p->len; i++)
        if (p->text[i] == '\n') {
            l++;
            line_start = i + 1;
        }
    *line = l;
    *column = (long)(offset - line_start) + 1;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min, cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A \u escape at s (s[0] == 'u'), a surrogate pair taking a second one;
 * the code point into *cp, the characters used after the backslash into
 * *used.  -1 on a bad escape. */
static int unicode_escape(const char *s, size_t avail, unsigned *cp, size_t *used)
{
    unsigned hi, lo;
    if (avail < 5 || hex4(s + 1, &hi)) return -1;
    *used = 5;
    if (hi >= 0xdc00 && hi <= 0xdfff) return -1;
    if (hi < 0xd800 || hi > 0xdbff) {
        *cp = hi;
        return 0;
    }
    if (avail < 11 || s[5] != '\\' || s[6] != 'u' || hex4(s + 7, &lo) || lo < 0xdc00 || lo > 0xdfff) return -1;
    *cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    *used = 11;
    return 0;
}

/* Finds the closing quote of the string whose body starts at p->pos,
 * checking characters and UTF-8 on the way. */
static int scan_string(json_parser_t *p, size_t *end, int *escaped)
{
    const unsigned char *t = (const unsigned char *)p->text;
    size_t i = p->pos;
    *escaped = 0;
    while (i < p->len) {
        unsigned char c = t[i];
        if (c == '"') {
            *end = i;
            return 0;
        }
        if (c == '\\') {
            *escaped = 1;
            i += 2;
            continue;
        }
        if (c < 0x20) return fail(p, i, "control character 0x%02x in a string", c);
        size_t n = utf8_sequence(t + i, p->len - i);
        if (n == 0) return fail(p, i, "invalid UTF-8 in a string");
        i += n;
    }
    return fail(p, p->pos - 1, "unterminated string");
}

static int unescape(json_parser_t *p, size_t end, char *out, size_t *out_len)
{
    const char *t = p->text;
    size_t o = 0, i = p->pos;
    while (i < end) {
        if (t[i] != '\\') {
            out[o++] = t[i++];
            continue;
        }
        char e = t[i + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            out[o++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            i += 2;
        } else if (e == 'u') {
            unsigned cp;
            size_t used;
            if (unicode_escape(t + i + 1, end - i - 1, &cp, &used)) return fail(p, i, "bad \\u escape in a string");
            o += put_utf8(out + o, cp);
            i += 1 + used;
        } else {
            return fail(p, i, "bad escape in a string");
        }
    }
    out[o] = '\0';
    *out_len = o;
    return 0;
}

int json_parse_string(json_parser_t *p, const char **out, size_t *out_len)
{
    if (json_expect(p, '"')) return -1;
    size_t end = 0;
    int escaped = 0;
    if (scan_string(p, &end, &escaped)) return -1;
    char *copy = arena_alloc(p->arena, end - p->pos + 1);
    if (!escaped) {
        memcpy(copy, p->text + p->pos, end - p->pos);
        copy[end - p->pos] = '\0';
        *out_len = end - p->pos;
    } else if (unescape(p, end, copy, out_len)) {
        return -1;
    }
    *out = copy;
    p->pos = end + 1;
    return 0;
}

static json_value_t *new_value(json_parser_t *p, json_type_t type, size_t begin)
{
    json_value_t *v = arena_alloc(p->arena, sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = type;
    v->begin = begin;
    return v;
}

/* An integer's exact value when its digits fit int64 */
static int exact_int(const char *digits, size_t n, int negative, int64_t *out)
{
    uint64_t v = 0;
    const uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(digits[i] - '0');
        if (v > (limit - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

static size_t skip_digits(const char *t, size_t i, size_t len)
{
    while (i < len && t[i] >= '0' && t[i] <= '9') i++;
    return i;
}

static json_value_t *parse_number(json_parser_t *p)
{
    const char *t = p->text;
    size_t begin = p->pos, i = p->pos;
    int negative = i < p->len && t[i] == '-';
    if (negative) i++;
    size_t int_begin = i;
    if (i < p->len && t[i] == '0') i++;
    else if (i < p->len && t[i] >= '1' && t[i] <= '9') i = skip_digits(t, i, p->len);
    else return fail(p, begin, "malformed number"), NULL;
    size_t int_end = i;
    int fractional = 0;
    if (i < p->len && t[i] == '.') {
        fractional = 1;
        if (skip_digits(t, i + 1, p->len) == i + 1) return fail(p, i, "malformed number"), NULL;
        i = skip_digits(t, i + 1, p->len);
    }
    if (i < p->len && (t[i] == 'e' || t[i] == 'E')) {
        fractional = 1;
        i++;
        if (i < p->len && (t[i] == '+' || t[i] == '-')) i++;
        if (skip_digits(t, i, p->len) == i) return fail(p, i, "malformed number"), NULL;
        i = skip_digits(t, i, p->len);
    }
    json_value_t *v = new_value(p, JSON_NUMBER, begin);
    if (!fractional && exact_int(t + int_begin, int_end - int_begin, negative, &v->u.num.i)) {
        v->u.num.is_int = 1;
        v->u.num.d = (double)v->u.num.i;
    } else {
        v->u.num.d = strtod(t + begin, NULL); /* the grammar was checked above */
    }
    p->pos = i;
    return v;
}

static json_value_t *parse_literal(json_parser_t *p)
{
    static const struct {
        const char *word;
        json_type_t type;
    } words[] = {{"true", JSON_TRUE}, {"false", JSON_FALSE}, {"null", JSON_NULL}};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t n = strlen(words[k].word);
        if (p->len - p->pos >= n && memcmp(p->text + p->pos, words[k].word, n) == 0) {
            json_value_t *v = new_value(p, words[k].type, p->pos);
            p->pos += n;
            return v;
        }
    }
    char what[16];
    fail(p, p->pos, "expected a value, found %s", describe_char(p, what, sizeof what));
    return NULL;
}

static json_value_t *parse_array(json_parser_t *p)
{
    json_value_t *v = new_value(p, JSON_ARRAY, p->pos);
    p->pos++; /* '[' */
    size_t base = p->items_len;
    if (json_peek(p) == ']') {
        p->pos++;
        return v;
    }
    for (;;) {
        json_value_t *item = json_parse_value(p);
        if (!item) return NULL;
        GROW(p->items, p->items_cap, p->items_len + 1);
        p->items[p->items_len++] = item;
        int c = json_peek(p);
        p->pos++;
        if (c == ']') break;
        if (c != ',') return p->pos--, fail(p, p->pos, "expected ',' or ']' in an array"), NULL;
    }
    size_t n = p->items_len - base;
    v->u.arr.items = arena_alloc(p->arena, n * sizeof *v->u.arr.items);
    memcpy(v->u.arr.items, p->items + base, n * sizeof *v->u.arr.items);
    v->u.arr.n = n;
    p->items_len = base;
    return v;
}

static int parse_member(json_parser_t *p)
{
    json_member_t m;
    if (json_peek(p) != '"') {
        char what[16];
        return fail(p, p->pos, "expected a key string, found %s", describe_char(p, what, sizeof what));
    }
    if (json_parse_string(p, &m.key, &m.key_len) || json_expect(p, ':')) return -1;
    m.value = json_parse_value(p);
    if (!m.value) return -1;
    GROW(p->members, p->members_cap, p->members_len + 1);
    p->members[p->members_len++] = m;
    return 0;
}

static json_value_t *parse_object(json_parser_t *p)
{
    json_value_t *v = new_value(p, JSON_OBJECT, p->pos);
    p->pos++; /* '{' */
    size_t base = p->members_len;
    if (json_peek(p) == '}') {
        p->pos++;
        return v;
    }
    for (;;) {
        if (parse_member(p)) return NULL;
        int c = json_peek(p);
        p->pos++;
        if (c == '}') break;
        if (c != ',') return p->pos--, fail(p, p->pos, "expected ',' or '}' in an object"), NULL;
    }
    size_t n = p->members_len - base;
    v->u.obj.members = arena_alloc(p->arena, n * sizeof *v->u.obj.members);
    memcpy(v->u.obj.members, p->members + base, n * sizeof *v->u.obj.members);
    v->u.obj.n = n;
    p->members_len = base;
    return v;
}

json_value_t *json_parse_value(json_parser_t *p)
{
    int c = json_peek(p);
    if (c < 0) return fail(p, p->pos, "expected a value, found the end"), NULL;
    if (++p->depth > JSON_MAX_DEPTH) return fail(p, p->pos, "nested deeper than %d", JSON_MAX_DEPTH), NULL;
    json_value_t *v;
    size_t begin = p->pos;
    if (c == '{') v = parse_object(p);
    else if (c == '[') v = parse_array(p);
    else if (c == '-' || (c >= '0' && c <= '9')) v = parse_number(p);
    else if (c == '"') {
        v = new_value(p, JSON_STRING, begin);
        if (json_parse_string(p, &v->u.str.s, &v->u.str.len)) v = NULL;
    } else v = parse_literal(p);
    p->depth--;
    if (v) {
        v->begin = begin;
        v->end = p->pos;
    } else {
        /* forget the children of the containers that failed */
        p->items_len = p->members_len = 0;
    }
    return v;
}

json_value_t *json_parse_document(json_parser_t *p)
{
    json_value_t *v = json_parse_value(p);
    if (v && json_peek(p) >= 0) {
        char what[16];
        fail(p, p->pos, "unexpected %s after the value", describe_char(p, what, sizeof what));
        return NULL;
    }
    return v;
}

const json_value_t *json_get(const json_value_t *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    /* the last of duplicate keys wins, as in most readers */
    for (size_t i = obj->u.obj.n; i-- > 0;) {
        const json_member_t *m = &obj->u.obj.members[i];
        if (m->key_len == n && memcmp(m->key, key, n) == 0) return m->value;
    }
    return NULL;
}

int json_get_int(const json_value_t *obj, const char *key, int64_t *out)
{
    const json_value_t *v = json_get(obj, key);
    if (!v || v->type != JSON_NUMBER || !v->u.num.is_int) return -1;
    *out = v->u.num.i;
    return 0;
}

int json_get_number(const json_value_t *obj, const char *key, double *out)
{
    const json_value_t *v = json_get(obj, key);
    if (!v || v->type != JSON_NUMBER) return -1;
    *out = v->u.num.d;
    return 0;
}

int json_get_string(const json_value_t *obj, const char *key, const char **out)
{
    const json_value_t *v = json_get(obj, key);
    if (!v || v->type != JSON_STRING) return -1;
    *out = v->u.str.s;
    return 0;
}

const char *json_type_name(json_type_t type)
{
    static const char *const names[] = {"null", "false", "true", "a number", "a string", "an array", "an object"};
    return names[type];
}

/* the escape for byte c, or NULL when it goes as it is */
static const char *escape_of(unsigned char c, char buf[8])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default:
        if (c >= 0x20) return NULL;
        snprintf(buf, 8, "\\u%04x", c);
        return buf;
    }
}

void json_write_string(strbuf_t *out, const char *s, size_t len)
{
    sb_putc(out, '"');
    size_t run = 0; /* bytes that need no escape, not yet copied */
    for (size_t i = 0; i < len; i++) {
        char buf[8];
        const char *esc = escape_of((unsigned char)s[i], buf);
        if (!esc) {
            run++;
            continue;
        }
        sb_append(out, s + i - run, run);
        run = 0;
        sb_puts(out, esc);
    }
    sb_append(out, s + len - run, run);
    sb_putc(out, '"');
}

void json_fwrite_string(FILE *out, const char *s, size_t len)
{
    strbuf_t sb = {0};
    json_write_string(&sb, s, len);
    fwrite(sb.data, 1, sb.len, out);
    sb_free(&sb);
}

void json_fwrite_number(FILE *out, double v)
{
    if (!isfinite(v)) fputs("null", out);
    else if (v == floor(v) && fabs(v) < 1e15) fprintf(out, "%.0f", v);
    else fprintf(out, "%.9g", v);
}

void json_write_value(strbuf_t *out, const json_value_t *v)
{
    switch (v->type) {
    case JSON_NULL: sb_puts(out, "null"); break;
    case JSON_FALSE: sb_puts(out, "false"); break;
    case JSON_TRUE: sb_puts(out, "true"); break;
    case JSON_NUMBER:
        if (v->u.num.is_int) sb_printf(out, "%lld", (long long)v->u.num.i);
        else sb_printf(out, "%.17g", v->u.num.d);
        break;
    case JSON_STRING: json_write_string(out, v->u.str.s, v->u.str.len); break;
    case JSON_ARRAY:
        sb_putc(out, '[');
        for (size_t i = 0; i < v->u.arr.n; i++) {
            if (i) sb_putc(out, ',');
            json_write_value(out, v->u.arr.items[i]);
        }
        sb_putc(out, ']');
        break;
    case JSON_OBJECT:
        sb_putc(out, '{');
        for (size_t i = 0; i < v->u.obj.n; i++) {
            if (i) sb_putc(out, ',');
            json_write_string(out, v->u.obj.members[i].key, v->u.obj.members[i].key_len);
            sb_putc(out, ':');
            json_write_value(out, v->u.obj.members[i].value);
        }
        sb_putc(out, '}');
        break;
    }
}
