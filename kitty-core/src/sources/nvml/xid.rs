//! The XID event thread: waits on an NVML event set for critical XID errors
//! and keeps the recent ones (at most 1000) for the poller's 5-minute counts.

use super::Shared;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::time::{Duration, Instant};

pub(super) fn xid_loop(nvml: &Nvml, shared: &Shared) {
    let Ok(mut set) = nvml.create_event_set() else {
        return;
    };
    let n = nvml.device_count().unwrap_or(0);
    for i in 0..n {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        let supported = dev
            .supported_event_types()
            .is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR));
        if !supported {
            continue;
        }
        set = match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => s,
            // The set is consumed on failure: start a fresh one for the others.
            Err(_) => match nvml.create_event_set() {
                Ok(s) => s,
                Err(_) => return,
            },
        };
    }
    loop {
        match set.wait(1000) {
            Ok(ev) => {
                let idx = ev.device.index().unwrap_or(u32::MAX);
                if let Some(nvml_wrapper::enums::event::XidError::Value(code)) = ev.event_data {
                    let mut x = shared.xids.lock().unwrap_or_else(|e| e.into_inner());
                    x.push_back((Instant::now(), idx, code));
                    while x.len() > 1000 {
                        x.pop_front();
                    }
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}
