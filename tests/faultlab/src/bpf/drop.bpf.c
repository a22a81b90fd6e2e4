// SPDX-License-Identifier: GPL-2.0
/* The fault lab's packet loss: a tc classifier that drops a chosen fraction
 * of the frames it sees. Put it where a real lossy link would be (the far
 * side of the sender), so that TCP sees a loss and retransmits. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* Frames dropped per million, set by the loader. */
const volatile __u32 drop_per_million = 0;

SEC("classifier")
int drop_fraction(struct __sk_buff *skb)
{
	if (bpf_get_prandom_u32() % 1000000 < drop_per_million)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
