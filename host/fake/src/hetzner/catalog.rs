//! The static catalogue the fake serves: locations, datacenters, server types
//! (with per-location prices) and system images.
//!
//! Values are modelled on the public Hetzner Cloud API reference and price
//! list; they are plausible, not authoritative. Prices are kept as integers in
//! ten-thousandths of a euro so that no floating-point noise ends up in the
//! decimal strings the API returns.

use serde_json::{Value, json};

/// German VAT applied to net prices to get gross prices, in percent.
const VAT_PERCENT: u64 = 19;
/// Hours the monthly price cap is spread over when deriving the hourly price.
const HOURS_PER_MONTH_CAP: u64 = 632;
/// US locations are this many percent dearer than the EU base price.
const US_SURCHARGE_PERCENT: u64 = 20;

/// A Hetzner location (a city with one or more datacenters).
#[derive(Debug)]
pub(crate) struct Location {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub country: &'static str,
    pub city: &'static str,
    pub latitude: f64,
    pub longitude: f64,
    pub network_zone: &'static str,
    /// The single virtual datacenter the fake places servers in.
    pub datacenter_id: u64,
    pub datacenter_name: &'static str,
    pub datacenter_description: &'static str,
}

/// All locations, in id order.
pub(crate) const LOCATIONS: &[Location] = &[
    Location {
        id: 1,
        name: "fsn1",
        description: "Falkenstein DC Park 1",
        country: "DE",
        city: "Falkenstein",
        latitude: 50.47612,
        longitude: 12.370071,
        network_zone: "eu-central",
        datacenter_id: 4,
        datacenter_name: "fsn1-dc14",
        datacenter_description: "Falkenstein 1 virtual DC 14",
    },
    Location {
        id: 2,
        name: "nbg1",
        description: "Nuremberg DC Park 1",
        country: "DE",
        city: "Nuremberg",
        latitude: 49.452102,
        longitude: 11.076665,
        network_zone: "eu-central",
        datacenter_id: 2,
        datacenter_name: "nbg1-dc3",
        datacenter_description: "Nuremberg 1 virtual DC 3",
    },
    Location {
        id: 3,
        name: "hel1",
        description: "Helsinki DC Park 1",
        country: "FI",
        city: "Helsinki",
        latitude: 60.169855,
        longitude: 24.938379,
        network_zone: "eu-central",
        datacenter_id: 3,
        datacenter_name: "hel1-dc2",
        datacenter_description: "Helsinki 1 virtual DC 2",
    },
    Location {
        id: 4,
        name: "ash",
        description: "Ashburn, VA",
        country: "US",
        city: "Ashburn",
        latitude: 39.045821,
        longitude: -77.487073,
        network_zone: "us-east",
        datacenter_id: 5,
        datacenter_name: "ash-dc1",
        datacenter_description: "Ashburn virtual DC 1",
    },
    Location {
        id: 5,
        name: "hil",
        description: "Hillsboro, OR",
        country: "US",
        city: "Hillsboro",
        latitude: 45.54222,
        longitude: -122.95128,
        network_zone: "us-west",
        datacenter_id: 6,
        datacenter_name: "hil-dc1",
        datacenter_description: "Hillsboro virtual DC 1",
    },
];

impl Location {
    /// The JSON object the API returns for this location.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "country": self.country,
            "city": self.city,
            "latitude": self.latitude,
            "longitude": self.longitude,
            "network_zone": self.network_zone,
        })
    }

    /// The JSON object the API returns as a server's `datacenter`.
    pub(crate) fn datacenter_json(&self) -> Value {
        json!({
            "id": self.datacenter_id,
            "name": self.datacenter_name,
            "description": self.datacenter_description,
            "location": self.to_json(),
        })
    }

    fn is_us(&self) -> bool {
        self.country == "US"
    }
}

/// Looks a location up by its name (`fsn1`, ...).
pub(crate) fn location_by_name(name: &str) -> Option<&'static Location> {
    LOCATIONS.iter().find(|l| l.name == name)
}

/// Looks a location up by one of its datacenters' names (`fsn1-dc14`, ...).
pub(crate) fn location_by_datacenter(name: &str) -> Option<&'static Location> {
    LOCATIONS.iter().find(|l| l.datacenter_name == name)
}

/// A server type (a size of machine) and where it is sold.
#[derive(Debug)]
pub(crate) struct ServerType {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub cores: u32,
    pub memory_gb: f64,
    pub disk_gb: u32,
    pub dedicated: bool,
    pub arm: bool,
    /// Net monthly price in the EU locations, in 1/10000 EUR.
    pub monthly_net_eu: u64,
    /// Whether the type is also sold in the US locations.
    pub in_us: bool,
}

macro_rules! st {
    ($id:expr, $name:expr, $desc:expr, $cores:expr, $mem:expr, $disk:expr, $ded:expr, $arm:expr, $price:expr, $us:expr) => {
        ServerType {
            id: $id,
            name: $name,
            description: $desc,
            cores: $cores,
            memory_gb: $mem,
            disk_gb: $disk,
            dedicated: $ded,
            arm: $arm,
            monthly_net_eu: $price,
            in_us: $us,
        }
    };
}

/// The server type catalogue, in id order. No GPU types: Hetzner Cloud has
/// none in this catalogue (and no spot market either).
pub(crate) const SERVER_TYPES: &[ServerType] = &[
    st!(
        22, "cpx11", "CPX 11", 2, 2.0, 40, false, false, 43_500, true
    ),
    st!(
        23, "cpx21", "CPX 21", 3, 4.0, 80, false, false, 75_500, true
    ),
    st!(
        24, "cpx31", "CPX 31", 4, 8.0, 160, false, false, 136_000, true
    ),
    st!(
        25, "cpx41", "CPX 41", 8, 16.0, 240, false, false, 252_000, true
    ),
    st!(
        26, "cpx51", "CPX 51", 16, 32.0, 360, false, false, 549_000, true
    ),
    st!(45, "cax11", "CAX11", 2, 4.0, 40, false, true, 37_900, false),
    st!(93, "cax21", "CAX21", 4, 8.0, 80, false, true, 64_900, false),
    st!(
        96,
        "ccx13",
        "CCX13 Dedicated CPU",
        2,
        8.0,
        80,
        true,
        false,
        124_900,
        true
    ),
    st!(
        97,
        "ccx23",
        "CCX23 Dedicated CPU",
        4,
        16.0,
        160,
        true,
        false,
        244_900,
        true
    ),
    st!(
        98,
        "ccx33",
        "CCX33 Dedicated CPU",
        8,
        32.0,
        240,
        true,
        false,
        484_900,
        true
    ),
    st!(
        99,
        "ccx43",
        "CCX43 Dedicated CPU",
        16,
        64.0,
        360,
        true,
        false,
        964_900,
        true
    ),
    st!(104, "cx22", "CX22", 2, 4.0, 40, false, false, 37_900, false),
    st!(105, "cx32", "CX32", 4, 8.0, 80, false, false, 68_000, false),
    st!(
        106, "cx42", "CX42", 8, 16.0, 160, false, false, 164_000, false
    ),
    st!(
        107, "cx52", "CX52", 16, 32.0, 320, false, false, 324_000, false
    ),
];

/// Looks a server type up by name (`cx22`, ...).
pub(crate) fn server_type_by_name(name: &str) -> Option<&'static ServerType> {
    SERVER_TYPES.iter().find(|t| t.name == name)
}

/// Formats an amount in 1/10000 EUR the way the API does: `"3.7900"`.
fn money(ten_thousandths: u64) -> String {
    format!(
        "{}.{:04}",
        ten_thousandths / 10_000,
        ten_thousandths % 10_000
    )
}

/// Integer division rounding half up.
fn div_round(n: u64, d: u64) -> u64 {
    (n + d / 2) / d
}

impl ServerType {
    /// Whether this type can be ordered in `location`.
    pub(crate) fn offered_in(&self, location: &Location) -> bool {
        !location.is_us() || self.in_us
    }

    /// Net monthly price in `location`, in 1/10000 EUR.
    fn monthly_net(&self, location: &Location) -> u64 {
        if location.is_us() {
            div_round(self.monthly_net_eu * (100 + US_SURCHARGE_PERCENT), 100)
        } else {
            self.monthly_net_eu
        }
    }

    /// The `prices` array: one entry per location the type is offered in.
    fn prices_json(&self) -> Value {
        let prices: Vec<Value> = LOCATIONS
            .iter()
            .filter(|l| self.offered_in(l))
            .map(|l| {
                let monthly = self.monthly_net(l);
                let hourly = div_round(monthly, HOURS_PER_MONTH_CAP);
                let gross = |net: u64| div_round(net * (100 + VAT_PERCENT), 100);
                json!({
                    "location": l.name,
                    "price_hourly": { "net": money(hourly), "gross": money(gross(hourly)) },
                    "price_monthly": { "net": money(monthly), "gross": money(gross(monthly)) },
                    "included_traffic": if l.is_us() { 1_099_511_627_776_u64 } else { 21_990_232_555_520_u64 },
                    "price_per_tb_traffic": { "net": money(10_000), "gross": money(11_900) },
                })
            })
            .collect();
        Value::Array(prices)
    }

    /// The full server type object, as returned by `/server_types` and
    /// embedded in every server.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "cores": self.cores,
            "memory": self.memory_gb,
            "disk": self.disk_gb,
            "storage_type": "local",
            "cpu_type": if self.dedicated { "dedicated" } else { "shared" },
            "architecture": self.architecture(),
            "deprecated": false,
            "deprecation": null,
            "prices": self.prices_json(),
        })
    }

    /// `"x86"` or `"arm"`.
    pub(crate) fn architecture(&self) -> &'static str {
        if self.arm { "arm" } else { "x86" }
    }
}

/// A system image servers can be created from.
#[derive(Debug)]
pub(crate) struct Image {
    pub id: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub os_flavor: &'static str,
    pub os_version: &'static str,
}

/// The system images the fake knows.
pub(crate) const IMAGES: &[Image] = &[
    Image {
        id: 67_794_396,
        name: "ubuntu-22.04",
        description: "Ubuntu 22.04",
        os_flavor: "ubuntu",
        os_version: "22.04",
    },
    Image {
        id: 76_766_499,
        name: "rocky-9",
        description: "Rocky Linux 9",
        os_flavor: "rocky",
        os_version: "9",
    },
    Image {
        id: 114_690_387,
        name: "debian-12",
        description: "Debian 12",
        os_flavor: "debian",
        os_version: "12",
    },
    Image {
        id: 161_547_269,
        name: "ubuntu-24.04",
        description: "Ubuntu 24.04",
        os_flavor: "ubuntu",
        os_version: "24.04",
    },
];

/// Looks an image up by name or by numeric id (given as a string).
pub(crate) fn image_by_name_or_id(key: &str) -> Option<&'static Image> {
    IMAGES
        .iter()
        .find(|i| i.name == key || key.parse::<u64>().ok() == Some(i.id))
}

impl Image {
    /// The image object embedded in a server, for a server of `architecture`.
    pub(crate) fn to_json(&self, architecture: &str) -> Value {
        json!({
            "id": self.id,
            "type": "system",
            "status": "available",
            "name": self.name,
            "description": self.description,
            "os_flavor": self.os_flavor,
            "os_version": self.os_version,
            "architecture": architecture,
            "rapid_deploy": true,
            "deprecated": null,
            "labels": {},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_differ_by_location_and_skip_unoffered() {
        let cx22 = server_type_by_name("cx22").unwrap().to_json();
        let locs: Vec<&str> = cx22["prices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["location"].as_str().unwrap())
            .collect();
        assert_eq!(locs, ["fsn1", "nbg1", "hel1"]);
        assert_eq!(cx22["prices"][0]["price_hourly"]["net"], "0.0060");
        assert_eq!(cx22["prices"][0]["price_monthly"]["net"], "3.7900");
        assert_eq!(cx22["prices"][0]["price_monthly"]["gross"], "4.5101");

        let cpx11 = server_type_by_name("cpx11").unwrap().to_json();
        let prices = cpx11["prices"].as_array().unwrap();
        assert_eq!(prices.len(), 5);
        let eu = &prices[0]["price_monthly"]["net"];
        let us = &prices[3]["price_monthly"]["net"];
        assert_eq!(prices[3]["location"], "ash");
        assert_eq!(eu, "4.3500");
        assert_eq!(us, "5.2200");
    }

    #[test]
    fn catalogue_lookups() {
        assert!(location_by_name("hel1").is_some());
        assert!(location_by_name("xyz").is_none());
        assert_eq!(location_by_datacenter("ash-dc1").unwrap().name, "ash");
        assert_eq!(
            image_by_name_or_id("161547269").unwrap().name,
            "ubuntu-24.04"
        );
        assert_eq!(server_type_by_name("cax11").unwrap().architecture(), "arm");
        let ash = location_by_name("ash").unwrap();
        assert!(!server_type_by_name("cx22").unwrap().offered_in(ash));
        assert!(server_type_by_name("ccx13").unwrap().offered_in(ash));
    }
}
