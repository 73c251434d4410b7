//! The AWS Price List API (`pricing:GetProducts`, AWS JSON 1.1), for the
//! on-demand prices of types the bundled table does not price. Used only
//! when the operator sets `price_list_endpoint` (and grants that host).
//!
//! Each answer's `PriceList` holds products as JSON strings in the shape of
//! the bulk offer files: `product.attributes.instanceType` and
//! `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD` per hour.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use wasmprov_guest::{Error, Result};

/// `X-Amz-Target` of `GetProducts`.
pub const TARGET: &str = "AWSPriceListService.GetProducts";
/// The signing name of the Price List API.
pub const SERVICE: &str = "pricing";
/// The Price List API's default endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://api.pricing.us-east-1.amazonaws.com";

/// The region a Price List endpoint signs for: the `REGION` of
/// `api.pricing.REGION.amazonaws.com`, else `us-east-1`.
#[must_use]
pub fn signing_region(endpoint: &str) -> String {
    endpoint
        .split("://")
        .nth(1)
        .and_then(|host| host.strip_prefix("api.pricing."))
        .and_then(|rest| rest.split('.').next())
        .filter(|r| crate::settings::is_region_name(r))
        .unwrap_or("us-east-1")
        .to_string()
}

/// The body of one `GetProducts` call: Linux, shared tenancy, no
/// pre-installed software, used capacity, in `region`, of any of `types`.
#[must_use]
pub fn get_products(region: &str, types: &[&str], next_token: Option<&str>) -> String {
    let term =
        |field: &str, value: &str| json!({"Type": "TERM_MATCH", "Field": field, "Value": value});
    let mut body = json!({
        "ServiceCode": "AmazonEC2",
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
        "Filters": [
            term("regionCode", region),
            term("operatingSystem", "Linux"),
            term("tenancy", "Shared"),
            term("preInstalledSw", "NA"),
            term("capacitystatus", "Used"),
            {"Type": "ANY_OF", "Field": "instanceType", "Value": types.join(",")},
        ],
    });
    if let Some(t) = next_token {
        body["NextToken"] = json!(t);
    }
    body.to_string()
}

/// The hourly on-demand USD price of each instance type in one
/// `GetProducts` answer, and its `NextToken`. Products without an hourly
/// price above zero are left out.
///
/// # Errors
/// [`Error::Transport`] when the answer is not the JSON expected.
pub fn parse_products(body: &[u8]) -> Result<(BTreeMap<String, f64>, Option<String>)> {
    let bad = |e: String| Error::Transport(format!("the Price List API sent {e}"));
    let answer: Value = serde_json::from_slice(body).map_err(|e| bad(format!("bad JSON: {e}")))?;
    let list = answer
        .get("PriceList")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no PriceList".into()))?;
    let mut out = BTreeMap::new();
    for item in list {
        let product: Value = match item {
            Value::String(s) => {
                serde_json::from_str(s).map_err(|e| bad(format!("a bad product: {e}")))?
            }
            other => other.clone(),
        };
        let Some(name) = product
            .pointer("/product/attributes/instanceType")
            .and_then(Value::as_str)
        else {
            continue;
        };
        let hourly = product
            .pointer("/terms/OnDemand")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|terms| terms.values())
            .filter_map(|term| term.get("priceDimensions")?.as_object())
            .flat_map(|dims| dims.values())
            .filter(|d| d.get("unit").and_then(Value::as_str) == Some("Hrs"))
            .filter_map(|d| {
                d.pointer("/pricePerUnit/USD")?
                    .as_str()?
                    .parse::<f64>()
                    .ok()
            })
            .find(|p| p.is_finite() && *p > 0.0);
        if let Some(p) = hourly {
            out.insert(name.to_string(), p);
        }
    }
    let next = answer
        .get("NextToken")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_asks_for_linux_on_demand_of_the_types() {
        let body: Value = serde_json::from_str(&get_products(
            "eu-west-1",
            &["m7g.large", "c7g.xlarge"],
            Some("t2"),
        ))
        .unwrap();
        assert_eq!(body["ServiceCode"], "AmazonEC2");
        assert_eq!(body["NextToken"], "t2");
        let filters = body["Filters"].as_array().unwrap();
        let value = |field: &str| {
            filters
                .iter()
                .find(|f| f["Field"] == field)
                .map(|f| (f["Type"].as_str().unwrap(), f["Value"].as_str().unwrap()))
        };
        assert_eq!(value("regionCode"), Some(("TERM_MATCH", "eu-west-1")));
        assert_eq!(value("operatingSystem"), Some(("TERM_MATCH", "Linux")));
        assert_eq!(value("tenancy"), Some(("TERM_MATCH", "Shared")));
        assert_eq!(
            value("instanceType"),
            Some(("ANY_OF", "m7g.large,c7g.xlarge"))
        );
        assert!(!get_products("us-east-1", &["a"], None).contains("NextToken"));
        assert_eq!(signing_region(DEFAULT_ENDPOINT), "us-east-1");
        assert_eq!(
            signing_region("https://api.pricing.ap-south-1.amazonaws.com"),
            "ap-south-1"
        );
        assert_eq!(signing_region("http://127.0.0.1:5000"), "us-east-1");
    }

    #[test]
    fn prices_are_read_from_the_price_list() {
        let product = |name: &str, usd: &str, unit: &str| {
            json!({
                "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": name}},
                "terms": {"OnDemand": {"X.JRTCKXETXF": {"priceDimensions": {
                    "X.JRTCKXETXF.6YS6EN2CT7": {"unit": unit, "pricePerUnit": {"USD": usd}}
                }}}}
            })
            .to_string()
        };
        let answer = json!({
            "FormatVersion": "aws_v1",
            "PriceList": [
                product("m7g.large", "0.0892000000", "Hrs"),
                product("c7g.large", "0.0000000000", "Hrs"),
                product("r7g.large", "1.0", "Quantity"),
            ],
            "NextToken": "more",
        });
        let (prices, next) = parse_products(answer.to_string().as_bytes()).unwrap();
        assert_eq!(prices, BTreeMap::from([("m7g.large".to_string(), 0.0892)]));
        assert_eq!(next.as_deref(), Some("more"));
        let (none, next) = parse_products(br#"{"PriceList": [], "NextToken": ""}"#).unwrap();
        assert!(none.is_empty() && next.is_none());
        assert!(matches!(
            parse_products(b"<xml/>"),
            Err(Error::Transport(_))
        ));
        assert!(matches!(parse_products(b"{}"), Err(Error::Transport(_))));
    }
}
