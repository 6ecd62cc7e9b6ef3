//! eBPF instructions: the 8-byte slot, opcode constants, decoding and
//! encoding (RFC 9669, the kernel's `Documentation/bpf/standardization/
//! instruction-set.rst`).

use crate::Error;

/// One 8-byte instruction slot.
///
/// A 64-bit immediate load (`LDDW`, opcode 0x18) takes two slots; the
/// second is kept as its own `Insn` (opcode 0, its `imm` the upper 32
/// bits) so that program counters match the object file's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Insn {
    /// The opcode byte: class, size/mode or operation, source.
    pub code: u8,
    /// Destination register (0..=10).
    pub dst: u8,
    /// Source register (0..=10), or a pseudo-source for `LDDW` and `CALL`.
    pub src: u8,
    /// Signed offset: memory displacement or jump distance.
    pub off: i16,
    /// Signed 32-bit immediate.
    pub imm: i32,
}

/// Size of one instruction slot in bytes.
pub const SLOT: usize = 8;

// Instruction classes (low 3 bits of the opcode).
/// Class: non-standard loads (`LDDW`, legacy packet loads).
pub const BPF_LD: u8 = 0x00;
/// Class: load into a register from memory.
pub const BPF_LDX: u8 = 0x01;
/// Class: store an immediate into memory.
pub const BPF_ST: u8 = 0x02;
/// Class: store a register into memory (and atomics).
pub const BPF_STX: u8 = 0x03;
/// Class: 32-bit arithmetic.
pub const BPF_ALU: u8 = 0x04;
/// Class: 64-bit jumps, calls, exit.
pub const BPF_JMP: u8 = 0x05;
/// Class: 32-bit jumps.
pub const BPF_JMP32: u8 = 0x06;
/// Class: 64-bit arithmetic.
pub const BPF_ALU64: u8 = 0x07;

/// Source bit: the immediate is the operand.
pub const BPF_K: u8 = 0x00;
/// Source bit: the source register is the operand.
pub const BPF_X: u8 = 0x08;

// Arithmetic operations (high 4 bits).
/// `dst += src`.
pub const BPF_ADD: u8 = 0x00;
/// `dst -= src`.
pub const BPF_SUB: u8 = 0x10;
/// `dst *= src`.
pub const BPF_MUL: u8 = 0x20;
/// `dst /= src` (unsigned; signed with `off == 1`).
pub const BPF_DIV: u8 = 0x30;
/// `dst |= src`.
pub const BPF_OR: u8 = 0x40;
/// `dst &= src`.
pub const BPF_AND: u8 = 0x50;
/// `dst <<= src`.
pub const BPF_LSH: u8 = 0x60;
/// `dst >>= src` (logical).
pub const BPF_RSH: u8 = 0x70;
/// `dst = -dst`.
pub const BPF_NEG: u8 = 0x80;
/// `dst %= src` (unsigned; signed with `off == 1`).
pub const BPF_MOD: u8 = 0x90;
/// `dst ^= src`.
pub const BPF_XOR: u8 = 0xa0;
/// `dst = src` (sign-extending with `off` 8, 16, 32).
pub const BPF_MOV: u8 = 0xb0;
/// `dst >>= src` (arithmetic).
pub const BPF_ARSH: u8 = 0xc0;
/// Byte swap / endianness conversion.
pub const BPF_END: u8 = 0xd0;

// Jump operations (high 4 bits).
/// Unconditional jump.
pub const BPF_JA: u8 = 0x00;
/// Jump if equal.
pub const BPF_JEQ: u8 = 0x10;
/// Jump if greater (unsigned).
pub const BPF_JGT: u8 = 0x20;
/// Jump if greater or equal (unsigned).
pub const BPF_JGE: u8 = 0x30;
/// Jump if `dst & src != 0`.
pub const BPF_JSET: u8 = 0x40;
/// Jump if not equal.
pub const BPF_JNE: u8 = 0x50;
/// Jump if greater (signed).
pub const BPF_JSGT: u8 = 0x60;
/// Jump if greater or equal (signed).
pub const BPF_JSGE: u8 = 0x70;
/// Call a helper (`src == 0`) or a bpf-to-bpf function (`src == 1`).
pub const BPF_CALL: u8 = 0x80;
/// Return from the function (the program when in the main frame).
pub const BPF_EXIT: u8 = 0x90;
/// Jump if less (unsigned).
pub const BPF_JLT: u8 = 0xa0;
/// Jump if less or equal (unsigned).
pub const BPF_JLE: u8 = 0xb0;
/// Jump if less (signed).
pub const BPF_JSLT: u8 = 0xc0;
/// Jump if less or equal (signed).
pub const BPF_JSLE: u8 = 0xd0;

// Load/store sizes (bits 3-4) and modes (bits 5-7).
/// 4 bytes.
pub const BPF_W: u8 = 0x00;
/// 2 bytes.
pub const BPF_H: u8 = 0x08;
/// 1 byte.
pub const BPF_B: u8 = 0x10;
/// 8 bytes.
pub const BPF_DW: u8 = 0x18;
/// Mode: 64-bit immediate (`LDDW`).
pub const BPF_IMM: u8 = 0x00;
/// Mode: legacy absolute packet load.
pub const BPF_ABS: u8 = 0x20;
/// Mode: legacy indirect packet load.
pub const BPF_IND: u8 = 0x40;
/// Mode: memory access.
pub const BPF_MEM: u8 = 0x60;
/// Mode: sign-extending memory load.
pub const BPF_MEMSX: u8 = 0x80;
/// Mode: atomic read-modify-write.
pub const BPF_ATOMIC: u8 = 0xc0;

/// Atomic modifier: the old value is returned in `src`.
pub const BPF_FETCH: i32 = 0x01;
/// Atomic: exchange.
pub const BPF_XCHG: i32 = 0xe0 | BPF_FETCH;
/// Atomic: compare `r0` with memory, store `src` if equal; old value in `r0`.
pub const BPF_CMPXCHG: i32 = 0xf0 | BPF_FETCH;

/// `LDDW` pseudo-source: `imm` is the index of a map (its handle is loaded).
pub const PSEUDO_MAP_FD: u8 = 1;
/// `LDDW` pseudo-source: a map index and an offset into its value (global data).
pub const PSEUDO_MAP_VALUE: u8 = 2;
/// `CALL` pseudo-source: a bpf-to-bpf call, `imm` relative to the next pc.
pub const PSEUDO_CALL: u8 = 1;

/// The `LDDW` opcode.
pub const LDDW: u8 = BPF_LD | BPF_IMM | BPF_DW;

impl Insn {
    /// An instruction from its fields.
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// The instruction class (`code & 7`).
    #[inline]
    pub const fn class(&self) -> u8 {
        self.code & 0x07
    }

    /// The operation (`code & 0xf0`) of an ALU or JMP instruction.
    #[inline]
    pub const fn op(&self) -> u8 {
        self.code & 0xf0
    }

    /// The access size in bytes of a load or store.
    #[inline]
    pub const fn size(&self) -> usize {
        match self.code & 0x18 {
            BPF_W => 4,
            BPF_H => 2,
            BPF_B => 1,
            _ => 8,
        }
    }

    /// Decodes one slot (little-endian, as clang emits for `-target bpf`).
    pub fn decode(slot: [u8; SLOT]) -> Insn {
        Insn {
            code: slot[0],
            dst: slot[1] & 0x0f,
            src: slot[1] >> 4,
            off: i16::from_le_bytes([slot[2], slot[3]]),
            imm: i32::from_le_bytes([slot[4], slot[5], slot[6], slot[7]]),
        }
    }

    /// Decodes a whole program.
    ///
    /// # Errors
    ///
    /// [`Error::Length`] when `bytes` is not a non-empty multiple of 8 bytes.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<Insn>, Error> {
        if bytes.is_empty() || bytes.len() % SLOT != 0 {
            return Err(Error::Length(bytes.len()));
        }
        Ok(bytes
            .chunks_exact(SLOT)
            .map(|c| {
                let mut s = [0u8; SLOT];
                s.copy_from_slice(c);
                Insn::decode(s)
            })
            .collect())
    }

    /// Encodes the slot.
    pub fn encode(&self) -> [u8; SLOT] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.dst & 0x0f) | (self.src << 4),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }

    /// Encodes a whole program.
    pub fn encode_all(insns: &[Insn]) -> Vec<u8> {
        insns.iter().flat_map(|i| i.encode()).collect()
    }
}

/// The kernel's helper ids and names (`linux/bpf.h`, `__BPF_FUNC_MAPPER`).
pub mod helper {
    /// `bpf_map_lookup_elem`.
    pub const MAP_LOOKUP_ELEM: u32 = 1;
    /// `bpf_map_update_elem`.
    pub const MAP_UPDATE_ELEM: u32 = 2;
    /// `bpf_map_delete_elem`.
    pub const MAP_DELETE_ELEM: u32 = 3;
    /// `bpf_ktime_get_ns`.
    pub const KTIME_GET_NS: u32 = 5;
    /// `bpf_trace_printk`.
    pub const TRACE_PRINTK: u32 = 6;
    /// `bpf_get_prandom_u32`.
    pub const GET_PRANDOM_U32: u32 = 7;
    /// `bpf_get_smp_processor_id`.
    pub const GET_SMP_PROCESSOR_ID: u32 = 8;
    /// `bpf_tail_call`.
    pub const TAIL_CALL: u32 = 12;
    /// `bpf_redirect`.
    pub const REDIRECT: u32 = 23;
    /// `bpf_csum_diff`.
    pub const CSUM_DIFF: u32 = 28;
    /// `bpf_xdp_adjust_head`.
    pub const XDP_ADJUST_HEAD: u32 = 44;
    /// `bpf_redirect_map`.
    pub const REDIRECT_MAP: u32 = 51;
    /// `bpf_xdp_adjust_meta`.
    pub const XDP_ADJUST_META: u32 = 54;
    /// `bpf_xdp_adjust_tail`.
    pub const XDP_ADJUST_TAIL: u32 = 65;
    /// `bpf_perf_event_output`.
    pub const PERF_EVENT_OUTPUT: u32 = 25;
    /// `bpf_ringbuf_output`.
    pub const RINGBUF_OUTPUT: u32 = 130;
    /// `bpf_ringbuf_reserve`.
    pub const RINGBUF_RESERVE: u32 = 131;
    /// `bpf_ringbuf_submit`.
    pub const RINGBUF_SUBMIT: u32 = 132;
    /// `bpf_ringbuf_discard`.
    pub const RINGBUF_DISCARD: u32 = 133;
    /// `bpf_ringbuf_query`.
    pub const RINGBUF_QUERY: u32 = 134;

    /// The kernel's names, in id order from 0 (`unspec`).
    const NAMES: &[&str] = &[
        "unspec",
        "map_lookup_elem",
        "map_update_elem",
        "map_delete_elem",
        "probe_read",
        "ktime_get_ns",
        "trace_printk",
        "get_prandom_u32",
        "get_smp_processor_id",
        "skb_store_bytes",
        "l3_csum_replace",
        "l4_csum_replace",
        "tail_call",
        "clone_redirect",
        "get_current_pid_tgid",
        "get_current_uid_gid",
        "get_current_comm",
        "get_cgroup_classid",
        "skb_vlan_push",
        "skb_vlan_pop",
        "skb_get_tunnel_key",
        "skb_set_tunnel_key",
        "perf_event_read",
        "redirect",
        "get_route_realm",
        "perf_event_output",
        "skb_load_bytes",
        "get_stackid",
        "csum_diff",
        "skb_get_tunnel_opt",
        "skb_set_tunnel_opt",
        "skb_change_proto",
        "skb_change_type",
        "skb_under_cgroup",
        "get_hash_recalc",
        "get_current_task",
        "probe_write_user",
        "current_task_under_cgroup",
        "skb_change_tail",
        "skb_pull_data",
        "csum_update",
        "set_hash_invalid",
        "get_numa_node_id",
        "skb_change_head",
        "xdp_adjust_head",
        "probe_read_str",
        "get_socket_cookie",
        "get_socket_uid",
        "set_hash",
        "setsockopt",
        "skb_adjust_room",
        "redirect_map",
        "sk_redirect_map",
        "sock_map_update",
        "xdp_adjust_meta",
        "perf_event_read_value",
        "perf_prog_read_value",
        "getsockopt",
        "override_return",
        "sock_ops_cb_flags_set",
        "msg_redirect_map",
        "msg_apply_bytes",
        "msg_cork_bytes",
        "msg_pull_data",
        "bind",
        "xdp_adjust_tail",
        "skb_get_xfrm_state",
        "get_stack",
        "skb_load_bytes_relative",
        "fib_lookup",
        "sock_hash_update",
        "msg_redirect_hash",
        "sk_redirect_hash",
        "lwt_push_encap",
        "lwt_seg6_store_bytes",
        "lwt_seg6_adjust_srh",
        "lwt_seg6_action",
        "rc_repeat",
        "rc_keydown",
        "skb_cgroup_id",
        "get_current_cgroup_id",
        "get_local_storage",
        "sk_select_reuseport",
        "skb_ancestor_cgroup_id",
        "sk_lookup_tcp",
        "sk_lookup_udp",
        "sk_release",
        "map_push_elem",
        "map_pop_elem",
        "map_peek_elem",
        "msg_push_data",
        "msg_pop_data",
        "rc_pointer_rel",
        "spin_lock",
        "spin_unlock",
        "sk_fullsock",
        "tcp_sock",
        "skb_ecn_set_ce",
        "get_listener_sock",
        "skc_lookup_tcp",
        "tcp_check_syncookie",
        "sysctl_get_name",
        "sysctl_get_current_value",
        "sysctl_get_new_value",
        "sysctl_set_new_value",
        "strtol",
        "strtoul",
        "sk_storage_get",
        "sk_storage_delete",
        "send_signal",
        "tcp_gen_syncookie",
        "skb_output",
        "probe_read_user",
        "probe_read_kernel",
        "probe_read_user_str",
        "probe_read_kernel_str",
        "tcp_send_ack",
        "send_signal_thread",
        "jiffies64",
        "read_branch_records",
        "get_ns_current_pid_tgid",
        "xdp_output",
        "get_netns_cookie",
        "get_current_ancestor_cgroup_id",
        "sk_assign",
        "ktime_get_boot_ns",
        "seq_printf",
        "seq_write",
        "sk_cgroup_id",
        "sk_ancestor_cgroup_id",
        "ringbuf_output",
        "ringbuf_reserve",
        "ringbuf_submit",
        "ringbuf_discard",
        "ringbuf_query",
        "csum_level",
        "skc_to_tcp6_sock",
        "skc_to_tcp_sock",
        "skc_to_tcp_timewait_sock",
        "skc_to_tcp_request_sock",
        "skc_to_udp6_sock",
        "get_task_stack",
        "load_hdr_opt",
        "store_hdr_opt",
        "reserve_hdr_opt",
        "inode_storage_get",
        "inode_storage_delete",
        "d_path",
        "copy_from_user",
        "snprintf_btf",
        "seq_printf_btf",
        "skb_cgroup_classid",
        "redirect_neigh",
        "per_cpu_ptr",
        "this_cpu_ptr",
        "redirect_peer",
        "task_storage_get",
        "task_storage_delete",
        "get_current_task_btf",
        "bprm_opts_set",
        "ktime_get_coarse_ns",
        "ima_inode_hash",
        "sock_from_file",
        "check_mtu",
        "for_each_map_elem",
        "snprintf",
        "sys_bpf",
        "btf_find_by_name_kind",
        "sys_close",
        "timer_init",
        "timer_set_callback",
        "timer_start",
        "timer_cancel",
        "get_func_ip",
        "get_attach_cookie",
        "task_pt_regs",
        "get_branch_snapshot",
        "trace_vprintk",
        "skc_to_unix_sock",
        "kallsyms_lookup_name",
        "find_vma",
        "loop",
        "strncmp",
        "get_func_arg",
        "get_func_ret",
        "get_func_arg_cnt",
        "get_retval",
        "set_retval",
        "xdp_get_buff_len",
        "xdp_load_bytes",
        "xdp_store_bytes",
        "copy_from_user_task",
        "skb_set_tstamp",
        "ima_file_hash",
        "kptr_xchg",
        "map_lookup_percpu_elem",
        "skc_to_mptcp_sock",
        "dynptr_from_mem",
        "ringbuf_reserve_dynptr",
        "ringbuf_submit_dynptr",
        "ringbuf_discard_dynptr",
        "dynptr_read",
        "dynptr_write",
        "dynptr_data",
        "tcp_raw_gen_syncookie_ipv4",
        "tcp_raw_gen_syncookie_ipv6",
        "tcp_raw_check_syncookie_ipv4",
        "tcp_raw_check_syncookie_ipv6",
        "ktime_get_tai_ns",
        "user_ringbuf_drain",
        "cgrp_storage_get",
        "cgrp_storage_delete",
    ];

    /// The kernel's name for helper `id` (without the `bpf_` prefix), if
    /// the id is one the kernel defines.
    pub fn name(id: u32) -> Option<&'static str> {
        NAMES.get(id as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let i = Insn::new(BPF_STX | BPF_MEM | BPF_DW, 10, 3, -8, 0x1234_5678);
        assert_eq!(Insn::decode(i.encode()), i);
        assert_eq!(i.encode(), [0x7b, 0x3a, 0xf8, 0xff, 0x78, 0x56, 0x34, 0x12]);
    }

    #[test]
    fn decode_all_refuses_partial_slots() {
        assert!(matches!(Insn::decode_all(&[0; 12]), Err(Error::Length(12))));
        assert!(matches!(Insn::decode_all(&[]), Err(Error::Length(0))));
        assert_eq!(
            Insn::decode_all(&[0x95, 0, 0, 0, 0, 0, 0, 0])
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn helper_names_match_the_kernel() {
        assert_eq!(helper::name(1), Some("map_lookup_elem"));
        assert_eq!(helper::name(helper::CSUM_DIFF), Some("csum_diff"));
        assert_eq!(
            helper::name(helper::XDP_ADJUST_HEAD),
            Some("xdp_adjust_head")
        );
        assert_eq!(helper::name(helper::REDIRECT_MAP), Some("redirect_map"));
        assert_eq!(
            helper::name(helper::XDP_ADJUST_TAIL),
            Some("xdp_adjust_tail")
        );
        assert_eq!(helper::name(211), Some("cgrp_storage_delete"));
        assert_eq!(helper::name(212), None);
    }
}
