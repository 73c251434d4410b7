#!/usr/bin/env python3
"""Regenerates ../src/prices.rs from AWS Price List bulk offer files.

Download the EC2 offer file of each region (public, no credentials; each is
a few GB of JSON):

    for r in us-east-1 us-east-2 us-west-2 eu-west-1 eu-central-1 \
             ap-southeast-1 ap-northeast-1; do
        curl -sSfo "$r.json" \
          "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/$r/index.json"
    done
    python3 generate.py us-east-1.json us-east-2.json ... > ../src/prices.rs

Kept: products of family "Compute Instance" with operatingSystem Linux,
tenancy Shared, preInstalledSw NA, capacitystatus Used, licenseModel "No
License required", of the families in FAMILIES and not metal; their
OnDemand "Hrs" price in USD. Regions whose prices are all equal share one
table. The file streams each offer with the standard library's json only.
"""

import json
import sys
from datetime import date

FAMILIES = set(
    "m5 m6i m6a m6g m7i m7a m7g m8g c5 c6i c6a c6g c7i c7a c7g c8g "
    "r5 r6i r6a r6g r7i r7a r7g r8g t3 t3a t4g "
    "g4dn g4ad g5 g6 p3 p4d p4de p5".split()
)


def wanted(attrs):
    name = attrs.get("instanceType", "")
    family, _, size = name.partition(".")
    return (
        family in FAMILIES
        and "metal" not in size
        and attrs.get("operatingSystem") == "Linux"
        and attrs.get("tenancy") == "Shared"
        and attrs.get("preInstalledSw") == "NA"
        and attrs.get("capacitystatus") == "Used"
        and attrs.get("licenseModel", "No License required") == "No License required"
    )


def prices(offer):
    """{region: {instance type: hourly USD}} of one offer file."""
    skus = {}
    for sku, product in offer["products"].items():
        attrs = product.get("attributes", {})
        if product.get("productFamily") == "Compute Instance" and wanted(attrs):
            skus[sku] = (attrs["regionCode"], attrs["instanceType"])
    out = {}
    for sku, terms in offer["terms"]["OnDemand"].items():
        if sku not in skus:
            continue
        region, name = skus[sku]
        for term in terms.values():
            for dim in term["priceDimensions"].values():
                usd = float(dim["pricePerUnit"].get("USD", "0"))
                if dim.get("unit") == "Hrs" and usd > 0:
                    out.setdefault(region, {})[name] = usd
    return out


def fmt(x):
    s = ("%.6f" % x).rstrip("0")
    return s + "0" if s.endswith(".") else s


def const_name(region):
    return region.upper().replace("-", "_")


def main(paths):
    regions = {}
    for path in paths:
        with open(path) as f:
            regions.update(prices(json.load(f)))
    order = sorted(regions)
    tables = {}  # const name -> (regions, prices)
    names = {}
    for r in order:
        shared = next((n for n, (_, p) in tables.items() if p == regions[r]), None)
        if shared:
            tables[shared][0].append(r)
            names[r] = shared
        else:
            tables[const_name(r)] = ([r], regions[r])
            names[r] = const_name(r)
    print("//! On-demand Linux prices (hourly USD, shared tenancy, no pre-installed")
    print("//! software) by region and instance type: see the crate README, \"Prices\", for")
    print("//! where the figures come from and `prices/generate.py` for how to regenerate")
    print("//! this file from the AWS Price List bulk offer files.\n")
    print("/// Where the figures come from.")
    print(
        'pub const SOURCE: &str = "AWS Price List (AmazonEC2 offer, on-demand Linux, '
        'shared tenancy), bulk offer files of %s";\n' % date.today().isoformat()
    )
    print("/// Regions and their prices, each list sorted by instance type.")
    print("pub const REGIONS: &[(&str, &[(&str, f64)])] = &[")
    for r in order:
        print('    ("%s", %s),' % (r, names[r]))
    print("];\n")
    for name, (rs, p) in tables.items():
        print("/// %s." % ", ".join(rs))
        print("const %s: &[(&str, f64)] = &[" % name)
        for t in sorted(p):
            print('    ("%s", %s),' % (t, fmt(p[t])))
        print("];\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
