//! `pfild --generate`: pfild(8), pfild.toml(5) and the shell
//! completions, from the clap definitions, so they cannot drift from what
//! parses (scripts/deb.sh installs them).

use std::fmt::Write as _;
use std::io::Write;

/// What `--generate` prints.
pub const WHAT: &[&str] = &["man", "man-config", "bash", "zsh", "fish"];

/// The FILES, SIGNALS and SEE ALSO sections of pfild(8).
const MAN_EXTRA: &str = r"
.SH SIGNALS
.TP
\fBSIGHUP\fR
Re-read the \fB\-\-config\fR file and apply its hooks and chains in one
transaction (as \fBpfilctl reload\fR does); a bad file changes nothing and
the log says why. Settings of the \fB[pfild]\fR table need a restart: a
reload names those that changed and leaves them as they run.
.TP
\fBSIGINT\fR, \fBSIGTERM\fR
Stop: drain the workers, print the totals, detach XDP. A second signal
exits at once.
.SH SYSTEMD
Under systemd (\fBType=notify\fR), pfild sends READY=1 once its workers run,
RELOADING=1 and READY=1 around a reload, STOPPING=1 when it stops, a STATUS=
line each second, and WATCHDOG=1 when the unit sets \fBWatchdogSec=\fR.
.SH FILES
.TP
\fI/etc/pfil/pfild.toml\fR
The configuration the packaged service runs (\fBpfild.toml\fR(5)).
.TP
\fI/run/pfil/pfild.sock\fR
The control socket as root ($XDG_RUNTIME_DIR/pfil/pfild.sock otherwise).
.SH SEE ALSO
\fBpfilctl\fR(8), \fBpfild.toml\fR(5), \fBpcap-filter\fR(7), \fBsystemd.service\fR(5)
";

/// Writes `what` ([`WHAT`]) to `out`.
///
/// # Errors
/// An unknown `what`, or the write's error.
pub fn generate(what: &str, out: &mut dyn Write) -> Result<(), String> {
    if what == "man-config" {
        return out
            .write_all(config_page().as_bytes())
            .map_err(|e| e.to_string());
    }
    pfil_ctl::generate::generate(crate::args::command(), what, MAN_EXTRA, out)
}

/// roff-escape a line of text: backslashes, and a leading dot or quote.
fn roff(s: &str) -> String {
    let s = s.replace('\\', "\\\\").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// pfild.toml(5): the file's structure (written here, once) and its
/// `[pfild]` keys (from the clap definitions: every long option pfild
/// takes in a file, with its help).
pub fn config_page() -> String {
    let cmd = crate::args::command();
    let mut p = String::new();
    let _ = writeln!(
        p,
        ".TH PFILD.TOML 5 \"\" \"pfil-rs {}\" \"pfil-rs\"",
        env!("CARGO_PKG_VERSION")
    );
    p += r#".SH NAME
pfild.toml \- configuration file of pfild, the pfil\-rs dataplane
.SH SYNOPSIS
\fB/etc/pfil/pfild.toml\fR
.br
\fBpfild \-\-config\fR \fIFILE\fR [\fIOPTIONS\fR]
.br
\fBpfild \-\-check\-config\fR \fIFILE\fR
.SH DESCRIPTION
A TOML file with three tables.
\fB[pfild]\fR holds the daemon's settings: what the command line of
\fBpfild\fR(8) sets. \fB[hooks]\fR and \fB[heads]\fR hold the filters and the
chains of the heads: the format \fBpfilctl show\fR prints and \fBpfilctl
apply\fR reads. A configuration is the whole configuration: applying it (at
start, on SIGHUP, \fBpfilctl reload\fR or \fBpfilctl apply\fR) makes the
running hooks and chains equal to the file's in one transaction; links both
have keep their counters.
.PP
Options given on the command line override the file's settings; a mode on
the command line overrides the file's \fBmode\fR and \fBinterfaces\fR.
\fBpfild \-\-check\-config\fR reads the file as \fBpfild \-\-config\fR
would, builds its filters and plans its chains against the heads of its
interfaces, and reports the first error with its line and column; nothing
starts.
.SH THE [pfild] TABLE
.TP
\fBmode\fR = "sink" | "forward" | "gen"
What to run: receive and drop after the interface's in head; bump in the
wire between two interfaces; generate UDP frames through the out head.
.TP
\fBinterfaces\fR = [ "\fIIFACE\fR", ... ]
One interface for sink and gen, two for forward. The heads are named after
them.
.PP
Every other key is a long option of \fBpfild\fR(8) without its dashes,
with the value the option takes: a string or a number; \fBtrue\fR for a
flag (\fBfalse\fR: not set); a list for a list (\fBcpus = [2, 3]\fR is
\fB\-\-cpus 2,3\fR). Each value goes through the option's own parser.
The keys:
"#;
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if crate::settings::NOT_IN_FILE.contains(&long) {
            continue;
        }
        let value = if a.get_action().takes_values() {
            let v = a
                .get_value_names()
                .and_then(|n| n.first())
                .map_or("VALUE".to_owned(), ToString::to_string);
            format!(" = \\fI{}\\fR", roff(&v))
        } else {
            " = true".to_owned()
        };
        let help = a
            .get_long_help()
            .or(a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let _ = writeln!(p, ".TP\n\\fB{}\\fR{value}\n{}", roff(long), roff(&help));
    }
    p += r#".SH THE [hooks] AND [heads] TABLES
.TP
\fBversion\fR = 1
The format's version (optional).
.TP
\fB[hooks."\fR\fIMODULE\fR\fB:\fR\fIINSTANCE\fR\fB"]\fR
A hook built from the filter catalog (\fBpfild \-\-help\fR lists the
modules). Keys: \fBconfig\fR = "\fITEXT\fR" (the module's configuration,
e.g. "53" for drop\-udp; an acl takes "@\fIPATH\fR" of a rules file);
\fBkind\fR = "ethernet" (default) | "ipv4" | "ipv6";
\fBdirs\fR = "in,out" (default) | "in" | "out".
.TP
\fB[heads.\fR\fINAME\fR\fB]\fR
The chains of a head (the app's: they must exist), in walk order:
\fBin\fR = [ "\fIHOOK\fR", { hook = "\fIHOOK\fR", fail = "closed" }, ... ]
and \fBout\fR = [ ... ]. A chain not written is empty. \fBfail\fR says what
a panic of the hook does to its packets: "open" (default: they go on, the
link is removed) or "closed" (they are dropped, and the link keeps dropping
until \fBpfilctl reap\fR removes it).
.SH RELOAD
SIGHUP and \fBpfilctl reload\fR re-read the file. The hooks and chains are
applied in one transaction (the plan is logged); a file that does not parse
or does not fit changes nothing and says why. The file is read once
nothing has written it for 250 ms (a file rewritten in place may be valid
TOML cut short), at most 5 s after the reload began; to replace it, write
the new file beside it and rename it into place. The \fB[pfild]\fR settings
are read again and compared: those that changed need a restart, are named
in the log and the reply, and are left as they run.
.SH EXAMPLE
.nf
[pfild]
mode = "sink"
interfaces = ["veth0"]
queues = 1
xdp\-mode = "native"
control = "/run/pfil/pfild.sock"
metrics = "127.0.0.1:9464"
quiet = true
log = "info"

[hooks."drop\-udp:dns"]
config = "53"

[hooks."count:edge"]

[heads.veth0]
in = ["drop\-udp:dns", { hook = "count:edge", fail = "closed" }]
.fi
.SH SEE ALSO
\fBpfild\fR(8), \fBpfilctl\fR(8), \fBpcap\-filter\fR(7)
"#;
    p
}
