//! Serves the Linode fake on a free loopback port: prints its URL, then
//! serves until killed or until standard input closes.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    wasmprov_fake_linode::serve(wasmprov_fake_linode::STANDALONE_PAGE)
        .await?
        .run_until_stopped()
        .await
}
