#include "tokenizer/bytetok.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config/config.h"
#include "util/error.h"

#ifdef FB_BYTES_VOCAB_MIN
_Static_assert(BYTETOK_VOCAB == FB_BYTES_VOCAB_MIN, "byte tokenizer and config disagree on the vocabulary size");
#endif

static const char *const genre_names[BYTETOK_NGENRES] = {
    "fantasy", "romance", "urban", "scifi", "historical", "wuxia", "mystery", "other", "unknown",
};

static const char *const special_names[BYTETOK_VOCAB - 256] = {
    "<|pad|>",           "<|bos|>",          "<|eos|>",          "<|chapter_sep|>",
    "<|genre_fantasy|>", "<|genre_romance|>", "<|genre_urban|>", "<|genre_scifi|>",
    "<|genre_historical|>", "<|genre_wuxia|>", "<|genre_mystery|>", "<|genre_other|>",
    "<|genre_unknown|>",
};

/* Byte names built at compile time, so the table needs no initialisation and
 * is safe to read from any thread. */
#define BYTE_NAME(hi, lo) "<0x" #hi #lo ">"
#define BYTE_ROW(hi)                                                                              \
    BYTE_NAME(hi, 0), BYTE_NAME(hi, 1), BYTE_NAME(hi, 2), BYTE_NAME(hi, 3), BYTE_NAME(hi, 4),      \
        BYTE_NAME(hi, 5), BYTE_NAME(hi, 6), BYTE_NAME(hi, 7), BYTE_NAME(hi, 8), BYTE_NAME(hi, 9),  \
        BYTE_NAME(hi, A), BYTE_NAME(hi, B), BYTE_NAME(hi, C), BYTE_NAME(hi, D), BYTE_NAME(hi, E),  \
        BYTE_NAME(hi, F)
static const char *const byte_names[256] = {
    BYTE_ROW(0), BYTE_ROW(1), BYTE_ROW(2), BYTE_ROW(3), BYTE_ROW(4), BYTE_ROW(5), BYTE_ROW(6), BYTE_ROW(7),
    BYTE_ROW(8), BYTE_ROW(9), BYTE_ROW(A), BYTE_ROW(B), BYTE_ROW(C), BYTE_ROW(D), BYTE_ROW(E), BYTE_ROW(F),
};

int bytetok_genre_id(const char *genre_or_null, int *was_unknown_string)
{
    if (was_unknown_string)
        *was_unknown_string = 0;
    if (!genre_or_null)
        return GENRE_UNKNOWN;
    for (int g = 0; g < BYTETOK_NGENRES; g++)
        if (strcasecmp(genre_or_null, genre_names[g]) == 0)
            return g;
    if (was_unknown_string)
        *was_unknown_string = 1;
    return GENRE_OTHER;
}

const char *bytetok_genre_name(int genre)
{
    return genre >= 0 && genre < BYTETOK_NGENRES ? genre_names[genre] : NULL;
}

int bytetok_genre_token(int genre)
{
    FB_ASSERT(genre >= 0 && genre < BYTETOK_NGENRES);
    return BYTETOK_GENRE_FIRST + genre;
}

const char *bytetok_token_name(int id)
{
    if (id >= 0 && id < 256)
        return byte_names[id];
    if (id >= 256 && id < BYTETOK_VOCAB)
        return special_names[id - 256];
    return NULL;
}

void bytetok_encode(const uint8_t *bytes, size_t n, int32_t *ids)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = bytes[i];
}

size_t bytetok_decode(const int32_t *ids, size_t n, char **out)
{
    char unk[32];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < 256)
            len++;
        else if (ids[i] >= 256 && ids[i] < BYTETOK_VOCAB)
            len += strlen(special_names[ids[i] - 256]);
        else
            len += (size_t)snprintf(unk, sizeof unk, "<|id_%d|>", (int)ids[i]);
    }
    char *buf = fb_malloc(len + 1);
    char *p = buf;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < 256) {
            *p++ = (char)(uint8_t)ids[i];
        } else {
            const char *name = ids[i] < BYTETOK_VOCAB && ids[i] >= 256 ? special_names[ids[i] - 256] : NULL;
            if (!name) {
                snprintf(unk, sizeof unk, "<|id_%d|>", (int)ids[i]);
                name = unk;
            }
            size_t k = strlen(name);
            memcpy(p, name, k);
            p += k;
        }
    }
    *p = '\0';
    FB_ASSERT((size_t)(p - buf) == len);
    *out = buf;
    return len;
}
