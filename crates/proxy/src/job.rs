//! Windows: every stdio child runs in a job object that agent-discover alone holds, with kill-on-close set, so the
//! child and everything it starts end when the server is stopped or agent-discover exits in any way (what the child
//! guard's lifeline and process group do on Unix). The guard process is assigned right after it is created, before
//! it has started the server (it runs our own code first), so no descendant is outside the job.

use std::os::windows::io::RawHandle;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject,
};

/// A job object handle; closing it (drop) ends every process in the job.
#[derive(Debug)]
pub struct Job(HANDLE);

// SAFETY: a job handle is a kernel object reference, usable from any thread.
unsafe impl Send for Job {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for Job {}

impl Job {
    /// A new job with kill-on-close, holding `process`.
    pub fn holding(process: RawHandle) -> std::io::Result<Job> {
        // SAFETY: null attributes and name create an anonymous job; the handle is owned by the returned Job.
        let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if handle.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        let job = Job(handle);
        // SAFETY: an all-zero JOBOBJECT_EXTENDED_LIMIT_INFORMATION is a valid "no limits" value.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: `info` lives for the call and its size is passed.
        let ok = unsafe {
            SetInformationJobObject(
                job.0,
                JobObjectExtendedLimitInformation,
                (&raw const info).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if ok == 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both handles are open: the job ours, the process the caller's child.
        if unsafe { AssignProcessToJobObject(job.0, process as HANDLE) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(job)
    }

    /// Ends every process in the job now.
    pub fn terminate(&self) {
        // SAFETY: the handle is open for as long as self lives.
        unsafe { TerminateJobObject(self.0, 1) };
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle was opened by CreateJobObjectW and is closed once, here.
        unsafe { CloseHandle(self.0) };
    }
}
