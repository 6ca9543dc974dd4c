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
    /// One export request's timeout.
    pub timeout: Duration,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
    /// Batching: how long spans wait, how many wait at most (more are dropped), how many go in one request.
    pub delay: Duration,
    pub max_queue: usize,
    pub max_batch: usize,
}

/// Reads the configuration through `get` (the environment, or a test's map). `Ok(None)`: tracing is off. An error
/// says what is wrong (an unsupported protocol, a malformed number).
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
    let millis = |name: &str, default: u64| -> Result<u64, String> {
        match var(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| format!("{name}={v} is not a number of milliseconds")),
        }
    };
    let timeout = match var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
        Some(_) => millis("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000)?,
        None => millis("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)?,
    };
    let count = |name: &str, default: usize| -> Result<usize, String> {
        match var(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{name}={v} is not a positive number")),
        }
    };
    let max_queue = count("OTEL_BSP_MAX_QUEUE_SIZE", 2048)?;
    let max_batch = count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)?.min(max_queue);
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
        resource,
        delay: Duration::from_millis(millis("OTEL_BSP_SCHEDULE_DELAY", 5000)?),
        max_queue,
        max_batch,
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
        let grpc = cfg(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ]);
        assert!(grpc.unwrap_err().contains("gRPC is not supported"));
    }
}
