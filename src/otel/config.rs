//! The exporter's configuration from the standard `OTEL_*` variables (OpenTelemetry's SDK environment variables and
//! the OTLP exporter's). Tracing is on only when an endpoint is set and nothing turns it off.

use std::time::Duration;

/// The OTLP encoding: `http/protobuf` (the default) or `http/json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Protobuf,
    Json,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The full URL spans are posted to.
    pub endpoint: String,
    pub protocol: Protocol,
    pub headers: Vec<(String, String)>,
    /// One export request's timeout (`OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT`).
    pub timeout: Duration,
    /// One batch's export at most, retries included (`OTEL_BSP_EXPORT_TIMEOUT`).
    pub export_timeout: Duration,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
    /// Batching: how long spans wait, how many wait at most (more are dropped), how many go in one request.
    pub delay: Duration,
    pub max_queue: usize,
    pub max_batch: usize,
    /// What was set wrong and left at its default: logged on stderr at start-up.
    pub warnings: Vec<String>,
}

/// Reads the configuration through `get` (the environment, or a test's map). `Ok(None)`: tracing is off. An error
/// says what is wrong (an unsupported protocol or exporter, an endpoint that is no URL); a malformed number is a
/// warning (in [`Config::warnings`]) and its default.
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
    let var = |k: &str| {
        get(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if let Some(exporters) = var("OTEL_TRACES_EXPORTER") {
        let list: Vec<&str> = exporters.split(',').map(str::trim).collect();
        if list.iter().any(|e| e.eq_ignore_ascii_case("none")) {
            return Ok(None);
        }
        if let Some(other) = list.iter().find(|e| !e.eq_ignore_ascii_case("otlp")) {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={other} is not supported: agent-discover exports traces with `otlp` only (or `none`)"
            ));
        }
    }
    let endpoint = match (
        var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        var("OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        // The signal's own endpoint is used as it is.
        (Some(url), _) => url,
        // The base endpoint gets the signal's path.
        (None, Some(base)) => format!("{}/v1/traces", base.trim_end_matches('/')),
        (None, None) => return Ok(None),
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(format!(
            "the OTLP endpoint `{endpoint}` is not an http:// or https:// URL"
        ));
    }
    let protocol = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .as_deref()
    {
        None | Some("http/protobuf") => Protocol::Protobuf,
        Some("http/json") => Protocol::Json,
        Some("grpc") => {
            return Err(
                "OTLP over gRPC is not supported: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (or http/json) and \
                 point the endpoint at the collector's OTLP/HTTP port (4318 by default)"
                    .into(),
            );
        }
        Some(other) => {
            return Err(format!(
                "unknown OTLP protocol `{other}`: use http/protobuf or http/json"
            ));
        }
    };
    // The generic headers, overridden key by key by the signal's own.
    let mut headers = pairs(&var("OTEL_EXPORTER_OTLP_HEADERS").unwrap_or_default());
    for (k, v) in pairs(&var("OTEL_EXPORTER_OTLP_TRACES_HEADERS").unwrap_or_default()) {
        headers.retain(|(have, _)| !have.eq_ignore_ascii_case(&k));
        headers.push((k, v));
    }
    // Numbers: an invalid one is a warning and the standard default, not a reason to run without traces.
    let warnings = std::cell::RefCell::new(Vec::new());
    let number = |name: &str, default: u64, positive: bool| -> u64 {
        match var(name) {
            None => default,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 || !positive => n,
                _ => {
                    warnings.borrow_mut().push(format!(
                        "{name}={v} is not a {} number: using the default, {default}",
                        if positive { "positive" } else { "whole" }
                    ));
                    default
                }
            },
        }
    };
    let timeout = match var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
        Some(_) => number("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000, true),
        None => number("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000, true),
    };
    let export_timeout = number("OTEL_BSP_EXPORT_TIMEOUT", 30_000, true);
    let delay = number("OTEL_BSP_SCHEDULE_DELAY", 5000, false);
    let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", 2048, true) as usize;
    let mut max_batch = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, true) as usize;
    if max_batch > max_queue {
        // The specification: the batch size must not exceed the queue's.
        warnings.borrow_mut().push(format!(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE={max_batch} is more than OTEL_BSP_MAX_QUEUE_SIZE={max_queue}: using {max_queue}"
        ));
        max_batch = max_queue;
    }
    // The resource: OTEL_RESOURCE_ATTRIBUTES, with OTEL_SERVICE_NAME over its service.name.
    let mut resource = pairs(&var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default());
    let service = var("OTEL_SERVICE_NAME")
        .or_else(|| {
            resource
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| "agent-discover".into());
    resource.retain(|(k, _)| k != "service.name");
    resource.insert(0, ("service.name".into(), service));
    resource.push(("service.version".into(), env!("CARGO_PKG_VERSION").into()));
    resource.push(("telemetry.sdk.name".into(), "agent-discover".into()));
    resource.push(("telemetry.sdk.language".into(), "rust".into()));
    Ok(Some(Config {
        endpoint,
        protocol,
        headers,
        timeout: Duration::from_millis(timeout),
        export_timeout: Duration::from_millis(export_timeout),
        resource,
        delay: Duration::from_millis(delay),
        max_queue,
        max_batch,
        warnings: warnings.into_inner(),
    }))
}

/// `key1=value1,key2=value2` (W3C Baggage's form: values percent-encoded); malformed entries are skipped.
fn pairs(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|item| {
            let (k, v) = item.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (percent_decode(k), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h << 4) | l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Option<Config>, String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_env(|k| m.get(k).cloned())
    }

    #[test]
    fn off_without_an_endpoint_or_when_disabled() {
        assert_eq!(cfg(&[]), Ok(None));
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")];
        assert!(cfg(&on).unwrap().is_some());
        assert_eq!(cfg(&[on[0], ("OTEL_SDK_DISABLED", "TRUE")]), Ok(None));
        assert_eq!(cfg(&[on[0], ("OTEL_TRACES_EXPORTER", "none")]), Ok(None));
        assert!(cfg(&[on[0], ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
    }

    #[test]
    fn endpoints_protocols_headers_and_resource() {
        let c = cfg(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/")])
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoint, "http://h:4318/v1/traces");
        assert_eq!(c.protocol, Protocol::Protobuf);
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(
            c.resource[0],
            ("service.name".into(), "agent-discover".into())
        );
        let c = cfg(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=x%20y"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "A=2"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=r,deployment.environment=dev",
            ),
            ("OTEL_SERVICE_NAME", "svc"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint, "http://t:1/custom");
        assert_eq!(c.protocol, Protocol::Json);
        assert_eq!(
            c.headers,
            vec![("b".into(), "x y".into()), ("A".into(), "2".into())]
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.resource[0], ("service.name".into(), "svc".into()));
        assert!(
            c.resource
                .contains(&("deployment.environment".into(), "dev".into()))
        );
        assert_eq!(c.export_timeout, Duration::from_secs(30));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let grpc = cfg(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ]);
        assert!(grpc.unwrap_err().contains("gRPC is not supported"));
    }

    #[test]
    fn batch_variables_are_read_and_invalid_ones_warn_and_default() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318");
        let c = cfg(&[on]).unwrap().unwrap();
        assert_eq!(
            (
                c.delay,
                c.max_queue,
                c.max_batch,
                c.export_timeout,
                c.timeout
            ),
            (
                Duration::from_secs(5),
                2048,
                512,
                Duration::from_secs(30),
                Duration::from_secs(10)
            )
        );
        let c = cfg(&[
            on,
            ("OTEL_BSP_SCHEDULE_DELAY", "250"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "4000"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "900"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                c.delay,
                c.max_queue,
                c.max_batch,
                c.export_timeout,
                c.timeout
            ),
            (
                Duration::from_millis(250),
                100,
                10,
                Duration::from_secs(4),
                Duration::from_millis(700)
            )
        );
        assert!(c.warnings.is_empty());
        let c = cfg(&[
            on,
            ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "1.5"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                c.delay,
                c.max_queue,
                c.max_batch,
                c.export_timeout,
                c.timeout
            ),
            (
                Duration::from_secs(5),
                2048,
                512,
                Duration::from_secs(30),
                Duration::from_secs(10)
            )
        );
        assert_eq!(c.warnings.len(), 5, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("OTEL_EXPORTER_OTLP_TIMEOUT=ten"));
        let c = cfg(&[
            on,
            ("OTEL_BSP_MAX_QUEUE_SIZE", "8"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((c.max_queue, c.max_batch), (8, 8));
        assert_eq!(c.warnings.len(), 1);
    }
}
