/**
 * TLS to a wss:// coordinator, as the party's flags give it (PEM text, read from the files
 * --tls-ca, --tls-cert and --tls-key name): trust only `ca` for the coordinator's certificate
 * (pinning); `cert` and `key` together for mutual TLS. Declared once: the flags (cli.ts), the
 * party's configuration (party.ts) and the link's options (link.ts) all carry this.
 */
export interface ClientTls {
  ca?: string;
  cert?: string;
  key?: string;
}
