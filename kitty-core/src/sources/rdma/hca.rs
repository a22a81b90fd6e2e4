//! Which RDMA ports a rank uses: the devices of its open uverbs fds (what
//! it really opened), narrowed or, without them, chosen by its
//! `NCCL_IB_HCA` (NCCL's syntax: `mlx5_0:1,mlx5_1`, a leading `^` excludes,
//! a leading `=` matches names exactly instead of by prefix). `NCCL_NET=Socket`
//! means no RDMA at all.

/// One parsed `NCCL_IB_HCA`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HcaFilter {
    pub exclude: bool,
    pub exact: bool,
    /// (device name or prefix, port).
    pub entries: Vec<(String, Option<u32>)>,
}

impl HcaFilter {
    pub fn parse(spec: &str) -> HcaFilter {
        let mut s = spec.trim();
        let mut f = HcaFilter::default();
        if let Some(rest) = s.strip_prefix('^') {
            f.exclude = true;
            s = rest;
        }
        if let Some(rest) = s.strip_prefix('=') {
            f.exact = true;
            s = rest;
        }
        f.entries = s
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .take(64)
            .map(|e| match e.split_once(':') {
                Some((d, p)) => (d.to_string(), p.trim().parse().ok()),
                None => (e.to_string(), None),
            })
            .collect();
        f
    }

    /// Does the filter let this port through?
    pub fn allows(&self, device: &str, port: u32) -> bool {
        let hit = self.entries.iter().any(|(d, p)| {
            let name = if self.exact {
                device == d
            } else {
                device.starts_with(d.as_str())
            };
            name && p.is_none_or(|p| p == port)
        });
        hit != self.exclude
    }
}

/// The ports (`dev/port` ids) a rank uses: those of the queue pairs it
/// owns (RDMA netlink) when the kernel says; else from the devices its
/// uverbs fds name and its NCCL settings. `ports` are every (device, port)
/// of the node.
pub fn rank_ports(
    ports: &[(String, u32)],
    qps: &[(String, Option<u32>)],
    uverbs_devices: &[String],
    nccl: &[(String, String)],
) -> Vec<String> {
    if !qps.is_empty() {
        return ports
            .iter()
            .filter(|(d, p)| {
                qps.iter()
                    .any(|(qd, qp)| qd == d && qp.is_none_or(|q| q == *p))
            })
            .map(|(d, p)| format!("{d}/{p}"))
            .collect();
    }
    let env = |k: &str| {
        nccl.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    if env("NCCL_NET").is_some_and(|n| n.eq_ignore_ascii_case("socket")) {
        return Vec::new();
    }
    let filter = env("NCCL_IB_HCA").map(HcaFilter::parse);
    if uverbs_devices.is_empty() && filter.as_ref().is_none_or(|f| f.exclude) {
        // Neither opened devices nor a list naming them: unknown, not "all".
        return Vec::new();
    }
    ports
        .iter()
        .filter(|(d, _)| uverbs_devices.is_empty() || uverbs_devices.contains(d))
        .filter(|(d, p)| filter.as_ref().is_none_or(|f| f.allows(d, *p)))
        .map(|(d, p)| format!("{d}/{p}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> Vec<(String, u32)> {
        ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_2"]
            .iter()
            .flat_map(|d| [(d.to_string(), 1), (d.to_string(), 2)])
            .collect()
    }

    fn env(v: &str) -> Vec<(String, String)> {
        vec![("NCCL_IB_HCA".into(), v.into())]
    }

    #[test]
    fn nccl_ib_hca_prefix_exact_exclude_and_port() {
        assert_eq!(
            rank_ports(&ports(), &[], &[], &env("mlx5_1:1")),
            vec!["mlx5_1/1", "mlx5_10/1"],
            "a prefix matches mlx5_10 too, as in NCCL"
        );
        assert_eq!(
            rank_ports(&ports(), &[], &[], &env("=mlx5_1:1")),
            vec!["mlx5_1/1"]
        );
        let f = HcaFilter::parse("^=mlx5_0,mlx5_1");
        assert!(f.exclude && f.exact);
        assert!(!f.allows("mlx5_0", 1) && f.allows("mlx5_2", 1) && f.allows("mlx5_10", 2));
    }

    #[test]
    fn opened_devices_win_and_the_env_narrows_them() {
        let opened = vec!["mlx5_2".to_string()];
        assert_eq!(
            rank_ports(&ports(), &[], &opened, &[]),
            vec!["mlx5_2/1", "mlx5_2/2"]
        );
        assert_eq!(
            rank_ports(&ports(), &[], &opened, &env("mlx5_2:2")),
            vec!["mlx5_2/2"]
        );
    }

    #[test]
    fn owned_queue_pairs_say_it_first() {
        let qps = vec![
            ("mlx5_2".to_string(), Some(2)),
            ("mlx5_0".to_string(), None),
        ];
        assert_eq!(
            rank_ports(&ports(), &qps, &["mlx5_1".into()], &env("mlx5_1")),
            vec!["mlx5_0/1", "mlx5_0/2", "mlx5_2/2"]
        );
    }

    #[test]
    fn unknown_or_socket_transport_maps_no_port() {
        assert!(rank_ports(&ports(), &[], &[], &[]).is_empty());
        assert!(rank_ports(&ports(), &[], &[], &env("^mlx5_0")).is_empty());
        let sock = vec![
            ("NCCL_NET".to_string(), "Socket".to_string()),
            ("NCCL_IB_HCA".to_string(), "mlx5_0".to_string()),
        ];
        assert!(rank_ports(&ports(), &[], &["mlx5_0".into()], &sock).is_empty());
    }
}
