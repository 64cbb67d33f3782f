/* report/strbuf_file.h: util's buffer through io's atomic file (util may
 * not include io). */
#include "report/strbuf_file.h"

#include "io/atomic_file.h"

void sb_write_file(const strbuf_t *b, const char *path)
{
    atomic_write_file(path, b->s ? b->s : "", b->n);
}
