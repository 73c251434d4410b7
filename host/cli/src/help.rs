//! The text `--help` shows after each command's options: its examples,
//! and for `wasmprov` itself the exit codes ([`crate::exit`]).

/// The global flags' heading, apart from each command's own options.
pub(crate) const GLOBAL: &str = "Global options";

pub(crate) const TOP: &str = "\
Examples:
  wasmprov bundle --out plugins.d            # the Hetzner plugin and its manifest (--all: every one)
  wasmprov plugins                           # what loaded, with its grants
  wasmprov price hetzner --cpu 4 --memory 16GiB
  wasmprov --json describe hetzner | jq '.[].provider_id'
  wasmprov completions bash > ~/.local/share/bash-completion/completions/wasmprov

Exit codes:
  0   success (terminating a node that is already gone included)
  1   failure a retry will not mend: auth, quota, invalid_config, unsupported, conflict,
      a plugin that trapped or did not load
  2   usage: the command line is wrong
  66  not found (EX_NOINPUT): the node, request id or plugin the command names
  75  retryable (EX_TEMPFAIL): rate_limited, transport, not_sent, capacity, a plugin
      timeout, a journal that cannot be written or is in use, a host that is stopping
With --json, an error is {\"error\": {\"kind\", \"message\", \"retryable\", \"retry_after_ms\",
\"exit_code\", ...}} on stdout.";

pub(crate) const PLUGINS: &str = "\
Examples:
  wasmprov plugins
  wasmprov --plugin-dir /etc/wasmprov/plugins.d --json plugins";

pub(crate) const INSPECT: &str = "\
Examples:
  wasmprov inspect hetzner
  wasmprov --json inspect hetzner | jq .plugin.http_allow";

pub(crate) const PRICE: &str = "\
Examples:
  wasmprov price hetzner --cpu 4 --memory 16GiB
  wasmprov price aws-ec2 --cpu 2 --memory 4GiB --spot --zone eu-central-1a";

pub(crate) const RANK: &str = "\
Examples:
  wasmprov rank --cpu 4 --memory 16GiB
  wasmprov rank --cpu 2 --memory 4GiB --arch x86_64 --disk 60GiB";

pub(crate) const PROVISION: &str = "\
Examples:
  wasmprov provision hetzner --cpu 2 --memory 4GiB --zone nbg1 --request-id web-1 --label role=web
  wasmprov provision hetzner --cpu 2 --memory 4GiB --request-id web-2 \\
      --image debian-12 --user-data node.cloud-config --ssh-key ~/.ssh/id_ed25519.pub
  wasmprov --state-dir state provision hetzner --cpu 2 --memory 4GiB --request-id job-7 --lease-secs 3600";

pub(crate) const RENEW: &str = "\
Examples:
  wasmprov --state-dir state renew job-7 --lease-secs 7200";

pub(crate) const DESCRIBE: &str = "\
Examples:
  wasmprov describe hetzner
  wasmprov --json describe hetzner | jq -r '.[] | select(.status == \"running\") | .provider_id'";

pub(crate) const GET: &str = "\
Examples:
  wasmprov get hetzner 4711
  wasmprov get hetzner 4711; [ $? -eq 66 ] && echo 'no such node'";

pub(crate) const OFFERINGS: &str = "\
Examples:
  wasmprov offerings hetzner
  wasmprov --json offerings aws-ec2 | jq '.[] | select(.gpu > 0)'";

pub(crate) const TERMINATE: &str = "\
Examples:
  wasmprov terminate hetzner 4711            # exits 0 if the node is already gone
  wasmprov --state-dir state terminate hetzner 4711";

pub(crate) const LABEL: &str = "\
Examples:
  wasmprov label hetzner 4711 role=db team=core     # these labels, and the ownership ones
  wasmprov label hetzner 4711                       # only the ownership labels
  wasmprov --json label aws-ec2 i-0abc role=web | jq .labels";

pub(crate) const ADDRESS: &str = "\
Examples:
  wasmprov address assign aws-ec2 i-0abc --kind private            # a new secondary private IP
  wasmprov address assign hetzner 4711 --kind public --address 203.0.113.7
  wasmprov address release hetzner 4711 203.0.113.7";

pub(crate) const TARGET: &str = "\
Examples:
  wasmprov target register aws-ec2 arn:aws:elasticloadbalancing:...:targetgroup/web/1 i-0abc --port 80
  wasmprov target list hetzner 42
  wasmprov target deregister hetzner 42 4711";

pub(crate) const SUBNET: &str = "\
Examples:
  wasmprov subnet aws-ec2 subnet-0abc
  wasmprov --json subnet hetzner 1234 | jq .available_addresses";

pub(crate) const RECONCILE: &str = "\
Examples:
  wasmprov --state-dir state reconcile
  wasmprov --state-dir state reconcile --terminate-leaks --grace 120
  wasmprov --state-dir state reconcile --adopt    # after a lost or restored journal";

pub(crate) const HISTORY: &str = "\
Examples:
  wasmprov --state-dir state history --limit 20
  wasmprov --state-dir state --json history | jq '.[] | select(.kind == \"leak_terminated\")'";

pub(crate) const SCALE: &str = "\
Examples:
  wasmprov --state-dir state scale workers --desired 3 --cpu 2 --memory 4GiB --max 10
  wasmprov --state-dir state scale gpu --desired 1 --cpu 8 --memory 32GiB --gpu 1 --plugin aws-ec2
  wasmprov --state-dir state scale --desired 2 --group-file gpu-group.json   # Alien's or wasmprov's JSON";

pub(crate) const FAKE: &str = "\
Examples:
  wasmprov fake hetzner --listen 127.0.0.1:8787 &   # prints its token
  wasmprov fake refcloud";

pub(crate) const BUNDLE: &str = "\
Without --only or --all only hetzner is written: the others each need something only
you have (credentials, an AMI, a program), and a plugin that cannot list its nodes
makes every reconcile and scale fail. Each written plugin's needs are printed.

Examples:
  wasmprov bundle --out plugins.d                               # hetzner
  wasmprov bundle --out plugins.d --hetzner-endpoint http://127.0.0.1:8787/v1
  wasmprov bundle --out plugins.d --only aws-ec2 digitalocean
  wasmprov bundle --out plugins.d --all                         # every bundled plugin";

pub(crate) const DEMO: &str = "\
Examples:
  wasmprov demo
  wasmprov --json demo";

pub(crate) const TEST: &str = "\
Examples:
  wasmprov test hetzner
  wasmprov test cloud-init --faults default
  wasmprov test hetzner --record h.cassette.json && wasmprov test hetzner --replay h.cassette.json
  wasmprov test --component my.wasm --manifest my.toml --fake-command \"python3 fake.py\"";

pub(crate) const NEW: &str = "\
Examples:
  wasmprov new acme-cloud && cd acme-cloud && cargo test
  wasmprov new acme-py --lang python";

pub(crate) const SERVE: &str = "\
Examples:
  wasmprov serve --token-out ./serve.token              # gRPC 127.0.0.1:50151, metrics 127.0.0.1:9151
  wasmprov serve --log-format json --no-watch           # JSON logs; reload on SIGHUP only
  kill -HUP \"$(pidof wasmprov)\"                          # reload the plugin directory
  grpcurl -plaintext 127.0.0.1:50151 list                # server reflection";

pub(crate) const INSTALL: &str = "\
Examples:
  wasmprov install 127.0.0.1:5000/plugins/hetzner:1.0 --config endpoint=http://127.0.0.1:8787/v1
  wasmprov install ghcr.io/acme/plugins/acme:2.1 --secret token=ACME_TOKEN --yes   # no terminal
  wasmprov install ./acme.wasm --name acme";

pub(crate) const DECLARE: &str = "\
Examples:
  wasmprov declare app.wasm --capabilities capabilities.toml
  wasmprov declare app.wasm --out app.declared.wasm";

pub(crate) const PUSH: &str = "\
Examples:
  WASMPROV_SIGNING_PASSWORD=... wasmprov push built/hetzner.wasm 127.0.0.1:5000/plugins/hetzner:1.0 --sign release.key
  wasmprov push acme.wasm registry.example/plugins/acme:2.1 --signature acme.wasm.minisig";

pub(crate) const LOCK: &str = "\
Examples:
  wasmprov lock --check            # exits 1 on any drift
  cp new/hetzner.wasm plugins.d/ && wasmprov lock --update   # accept it (lock and pin)";

pub(crate) const COMPLETIONS: &str = "\
Examples:
  wasmprov completions bash > ~/.local/share/bash-completion/completions/wasmprov
  wasmprov completions zsh > \"${fpath[1]}/_wasmprov\"
  wasmprov completions fish > ~/.config/fish/completions/wasmprov.fish";

pub(crate) const MAN: &str = "\
Examples:
  wasmprov man | man -l -
  wasmprov man --out /usr/local/share/man/man1     # wasmprov.1 and one page per command";
