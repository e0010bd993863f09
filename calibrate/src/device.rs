//! The device measurements run on: parsing `--device cpu|cuda[:N]|metal[:N]`,
//! opening it with a clear error where this build or this machine cannot,
//! naming it for the profile, synchronizing it before the clock is read, and
//! reading how much memory is in use.

use crate::error::{input, Result};
use candle_core::{DType, Device};
use std::sync::Once;

/// A device as asked for on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    Cpu,
    Cuda(usize),
    Metal(usize),
}

impl DeviceSpec {
    /// Parses `cpu`, `cuda`, `cuda:N`, `metal` or `metal:N`.
    pub fn parse(s: &str) -> Result<DeviceSpec> {
        let bad = || {
            input(format!(
                "--device: unknown device {s:?}; allowed: cpu, cuda, cuda:N, metal, metal:N"
            ))
        };
        let (kind, ordinal) = match s.split_once(':') {
            Some((k, n)) => (k, n.parse::<usize>().map_err(|_| bad())?),
            None => (s, 0),
        };
        match kind {
            "cpu" if !s.contains(':') => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(ordinal)),
            "metal" => Ok(DeviceSpec::Metal(ordinal)),
            _ => Err(bad()),
        }
    }

    pub fn label(&self) -> String {
        match self {
            DeviceSpec::Cpu => "cpu".into(),
            DeviceSpec::Cuda(n) => format!("cuda:{n}"),
            DeviceSpec::Metal(n) => format!("metal:{n}"),
        }
    }
}

/// An opened device with what a profile says about it.
#[derive(Clone, Debug)]
pub struct OpenDevice {
    pub spec: DeviceSpec,
    pub device: Device,
    /// CPU model or GPU name.
    pub name: String,
    /// Driver version (GPU) or kernel release (CPU).
    pub driver: String,
    /// CPU worker threads (0 on GPUs).
    pub threads: usize,
}

static THREADS: Once = Once::new();

/// Fixes the CPU backend's thread count for the whole process, once and
/// before any tensor work: candle otherwise re-derives it from the CPU
/// topology on every operation, which shows up as timing noise. Returns the
/// count in force (a RAYON_NUM_THREADS already set wins).
pub fn fix_cpu_threads(requested: Option<usize>) -> usize {
    THREADS.call_once(|| {
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            let n = requested.unwrap_or_else(candle_core::utils::get_num_threads);
            // Called before the process starts any tensor threads.
            std::env::set_var("RAYON_NUM_THREADS", n.max(1).to_string());
        }
    });
    candle_core::utils::get_num_threads()
}

impl OpenDevice {
    /// Opens the device, or says why this build or this machine cannot.
    pub fn open(spec: DeviceSpec, threads: Option<usize>) -> Result<OpenDevice> {
        match spec {
            DeviceSpec::Cpu => {
                let threads = fix_cpu_threads(threads);
                Ok(OpenDevice {
                    spec,
                    device: Device::Cpu,
                    name: cpu_model(),
                    driver: kernel_release(),
                    threads,
                })
            }
            DeviceSpec::Cuda(n) => open_cuda(spec, n),
            DeviceSpec::Metal(n) => open_metal(spec, n),
        }
    }

    /// Waits until queued device work is done (no-op on CPU), so that a
    /// clock read after it measures the work.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.device.synchronize()?)
    }

    /// Runs `f` and returns once the work it queued is done, with the time
    /// the device's own clock gives that work where it has one, ns: on
    /// CUDA, the span between events recorded before and after it on the
    /// stream (gaps in which the GPU waits for the host's next launch fall
    /// inside the span); `None` on CPU and Metal.
    pub fn device_time<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<(T, Option<u64>)> {
        match self.spec {
            DeviceSpec::Cuda(_) => cuda_device_time(&self.device, f),
            _ => {
                let out = f()?;
                self.synchronize()?;
                Ok((out, None))
            }
        }
    }

    /// Device memory in all and in use, bytes: the driver's figures on CUDA,
    /// MemTotal and this process's resident set on CPU.
    pub fn memory(&self) -> Result<(f64, f64)> {
        match self.spec {
            DeviceSpec::Cpu => Ok((mem_total_bytes(), resident_bytes("VmRSS"))),
            DeviceSpec::Cuda(_) => cuda_memory(&self.device),
            DeviceSpec::Metal(_) => Err(input(
                "--device metal: memory measurement is not implemented for Metal; use cpu or cuda",
            )),
        }
    }

    /// Peak memory in use so far (CPU: VmHWM), if the platform reports it.
    pub fn peak_resident(&self) -> Option<f64> {
        (self.spec == DeviceSpec::Cpu).then(|| resident_bytes("VmHWM"))
    }

    /// Refuses dtypes the device cannot multiply in.
    pub fn check_dtype(&self, dtype: DType) -> Result<()> {
        if self.spec == DeviceSpec::Cpu && dtype == DType::BF16 {
            return Err(input(
                "--dtype bf16: candle's CPU backend has no bf16 matrix multiply; use f32 or f16 on cpu",
            ));
        }
        Ok(())
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(spec: DeviceSpec, n: usize) -> Result<OpenDevice> {
    // A missing driver library makes the CUDA bindings panic rather than
    // return an error: turn that into one.
    let device = std::panic::catch_unwind(|| Device::new_cuda(n))
        .map_err(|_| {
            input(format!(
                "--device cuda:{n}: the CUDA driver library (libcuda) could not be loaded on this machine"
            ))
        })?
        .map_err(|e| input(format!("--device cuda:{n}: cannot open the GPU: {}", crate::error::first_line(&e))))?;
    let (name, driver) = cuda_names(&device, n);
    Ok(OpenDevice {
        spec,
        device,
        name,
        driver,
        threads: 0,
    })
}

#[cfg(feature = "cuda")]
fn cuda_names(device: &Device, n: usize) -> (String, String) {
    use candle_core::cuda::cudarc::driver::sys;
    let name = device
        .as_cuda_device()
        .ok()
        .and_then(|d| d.cuda_stream().context().name().ok())
        .unwrap_or_else(|| format!("CUDA device {n}"));
    // cudarc 0.19 has no safe wrapper for the driver's version.
    let mut v: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int through the pointer and
    // needs no context; the driver library is loaded (the device opened).
    let rc = unsafe { sys::cuDriverGetVersion(&mut v) };
    let driver = if rc == sys::CUresult::CUDA_SUCCESS {
        format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10)
    } else {
        "CUDA driver (version unknown)".into()
    };
    (name, driver)
}

#[cfg(feature = "cuda")]
fn cuda_memory(device: &Device) -> Result<(f64, f64)> {
    use candle_core::cuda::cudarc::driver::result;
    let d = device.as_cuda_device()?;
    d.cuda_stream()
        .context()
        .bind_to_thread()
        .map_err(|e| input(format!("cuda: {e:?}")))?;
    let (free, total) = result::mem_get_info().map_err(|e| input(format!("cuda: {e:?}")))?;
    Ok((total as f64, (total - free) as f64))
}

#[cfg(feature = "cuda")]
fn cuda_device_time<T>(device: &Device, f: impl FnOnce() -> Result<T>) -> Result<(T, Option<u64>)> {
    use candle_core::cuda::cudarc::driver::{sys::CUevent_flags, DriverError};
    let err = |e: DriverError| input(format!("cuda events: {e:?}"));
    let stream = device.as_cuda_device()?.cuda_stream();
    // Events take no timestamps unless asked (cudarc's default disables
    // timing).
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.record_event(timing).map_err(err)?;
    let out = f()?;
    let end = stream.record_event(timing).map_err(err)?;
    // Waits for both events, so the work `f` queued is done.
    let ms = start.elapsed_ms(&end).map_err(err)?;
    Ok((out, Some((ms as f64 * 1e6).round() as u64)))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device_time<T>(_: &Device, f: impl FnOnce() -> Result<T>) -> Result<(T, Option<u64>)> {
    // No CUDA device opens in a build without the feature.
    Ok((f()?, None))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: DeviceSpec, n: usize) -> Result<OpenDevice> {
    Err(input(format!(
        "--device cuda:{n}: this build has no CUDA support; rebuild with `cargo build --release --features cuda` (needs the CUDA toolkit, see docs/calibration.md)"
    )))
}

#[cfg(not(feature = "cuda"))]
fn cuda_memory(_: &Device) -> Result<(f64, f64)> {
    Err(input("cuda: this build has no CUDA support"))
}

#[cfg(feature = "metal")]
fn open_metal(spec: DeviceSpec, n: usize) -> Result<OpenDevice> {
    let device = Device::new_metal(n).map_err(|e| {
        input(format!(
            "--device metal:{n}: cannot open: {}",
            crate::error::first_line(&e)
        ))
    })?;
    Ok(OpenDevice {
        spec,
        device,
        name: format!("Metal device {n}"),
        driver: "Metal".into(),
        threads: 0,
    })
}

#[cfg(not(feature = "metal"))]
fn open_metal(_: DeviceSpec, n: usize) -> Result<OpenDevice> {
    Err(input(format!(
        "--device metal:{n}: this build has no Metal support; rebuild with `--features metal` on macOS"
    )))
}

/// The CPU's model name from /proc/cpuinfo.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn kernel_release() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{} {release}", std::env::consts::OS)
        .trim()
        .to_string()
}

fn mem_total_bytes() -> f64 {
    meminfo_kib("/proc/meminfo", "MemTotal") * 1024.0
}

/// A `VmRSS` / `VmHWM` figure of this process, bytes.
fn resident_bytes(key: &str) -> f64 {
    meminfo_kib("/proc/self/status", key) * 1024.0
}

fn meminfo_kib(file: &str, key: &str) -> f64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(key) && l[key.len()..].starts_with(':'))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices_and_refuses_others_by_name() {
        assert_eq!(DeviceSpec::parse("cpu").unwrap(), DeviceSpec::Cpu);
        assert_eq!(DeviceSpec::parse("cuda").unwrap(), DeviceSpec::Cuda(0));
        assert_eq!(DeviceSpec::parse("cuda:3").unwrap(), DeviceSpec::Cuda(3));
        assert_eq!(DeviceSpec::parse("metal").unwrap(), DeviceSpec::Metal(0));
        for bad in ["tpu", "cpu:1", "cuda:x", "", "cuda:"] {
            let e = DeviceSpec::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--device: unknown device"), "{bad}: {e}");
            assert!(e.contains("allowed: cpu, cuda"), "{e}");
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_get_it() {
        let e = OpenDevice::open(DeviceSpec::Cuda(0), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no CUDA support") && e.contains("--features cuda"),
            "{e}"
        );
    }

    #[test]
    fn cpu_reports_its_model_and_memory() {
        let d = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        assert!(!d.name.is_empty());
        assert!(d.threads >= 1);
        let (total, used) = d.memory().unwrap();
        assert!(total > 1e8 && used > 1e6 && used < total, "{total} {used}");
        assert!(d.check_dtype(DType::BF16).is_err());
        assert!(d.check_dtype(DType::F32).is_ok());
    }
}
