/* Byte-at-a-time table CRC-32C: event files are small (a few KiB per step,
 * histograms sparse), so the table is fast enough and needs no CPU
 * extension. */
#include "tboard/crc32c.h"

/* The reflected form of 0x1EDC6F41. */
#define CRC32C_POLY 0x82f63b78u

static uint32_t table[256];
static int table_ready;

static void table_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1u ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        table[i] = c;
    }
    table_ready = 1;
}

uint32_t crc32c(const void *data, size_t n)
{
    /* only rank 0 writes, from the training thread: no race on the table */
    if (!table_ready)
        table_build();
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
