// SPDX-License-Identifier: MIT OR Apache-2.0
// LRU_PERCPU_HASH under pressure: the LRU_HASH workload of lru_big.c (a
// skewed popularity of thousands of flows, inserts with BPF_NOEXIST on a
// control bit, deletes, BPF_EXIST updates, the rc of every operation) on
// a common-LRU map of 150 entries and a BPF_F_NO_COMMON_LRU one of 60,
// whose values are per CPU and updated in place.
#define LRU_TYPE BPF_MAP_TYPE_LRU_PERCPU_HASH
#define LRU_COMMON 150
#define LRU_PERCPU 60
#include "lru_big.c"
