/* Where a layout's groups fall against the nodes: each tp, dp, ep and pp
 * group inside one node, or spanning nodes (docs/parallel.md "Groups and
 * nodes"). A tp group should stay inside a node (its all-reduces run every
 * layer); dp and pp groups usually cross them. */
#ifndef FABULA_PARALLEL_GROUP_NODES_H
#define FABULA_PARALLEL_GROUP_NODES_H

#include <stddef.h>

#include "parallel/groups.h"

enum { GROUP_NODES_TP, GROUP_NODES_DP, GROUP_NODES_EP, GROUP_NODES_PP, GROUP_NODES_KINDS };

typedef struct group_nodes {
    int nodes;                  /* nodes of the world (MPI_COMM_TYPE_SHARED) */
    int ranks_min, ranks_max;   /* ranks per node */
    /* per kind: 1 every group of it lies inside one node, 0 some spans
     * nodes, -1 its groups are single ranks */
    int inside[GROUP_NODES_KINDS];
} group_nodes_t;

/* Collective over the world. */
void group_nodes_find(const groups_t *g, group_nodes_t *out);

/* One line: "2 nodes x 2 ranks; tp groups inside a node; dp groups across
 * nodes", into buf. */
void group_nodes_text(const group_nodes_t *n, char *buf, size_t cap);

#endif
