//! A socket address as the frame shows it: the text `SocketAddr`'s own
//! `Display` gives, printed by hand for IPv4 (two per socket every tick: 1,024
//! a tick for 8 ranks of 64 sockets, where the formatting machinery cost
//! ~100 ns each), by `Display` for IPv6.

use super::Text;
use std::fmt::Write;
use std::net::SocketAddr;

/// `a` as `a.to_string()` prints it, as a [`Text`].
pub fn addr_text(a: &SocketAddr) -> Text {
    let mut s = String::with_capacity(21);
    match a {
        SocketAddr::V4(v4) => {
            for (i, o) in v4.ip().octets().iter().enumerate() {
                if i > 0 {
                    s.push('.');
                }
                push_decimal(&mut s, u32::from(*o));
            }
            s.push(':');
            push_decimal(&mut s, u32::from(v4.port()));
        }
        SocketAddr::V6(_) => {
            let _ = write!(s, "{a}");
        }
    }
    Text::from(s)
}

/// `n` in decimal, without leading zeros.
pub(crate) fn push_decimal(s: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        s.push(d as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ipv4_prints_as_display_does(ip: [u8; 4], port: u16) {
            let a = SocketAddr::from((ip, port));
            prop_assert_eq!(addr_text(&a).into_string(), a.to_string());
        }

        #[test]
        fn ipv6_prints_as_display_does(ip: [u16; 8], port: u16) {
            let a = SocketAddr::from((std::net::Ipv6Addr::from(ip), port));
            prop_assert_eq!(addr_text(&a).into_string(), a.to_string());
        }
    }

    #[test]
    fn the_edges() {
        for a in [
            "0.0.0.0:0",
            "255.255.255.255:65535",
            "10.0.0.1:80",
            "[::ffff:10.0.0.1]:443",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(addr_text(&a).as_str(), a.to_string());
        }
    }
}
