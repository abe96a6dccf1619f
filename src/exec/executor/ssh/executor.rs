//! The ssh executor behind the [`Executor`] seam.

use super::host::SshHost;
use super::run::start_ssh;
use crate::exec::LogSender;
use crate::exec::executor::remote_git::argv_script;
use crate::exec::executor::{
    BoxFuture, ExecError, Executor, Found, Labels, Launch, Program, Started,
};
use crate::pipeline::executor_spec::SshSpec;

/// Runs steps on one ssh host.
#[derive(Debug, Clone)]
pub struct Ssh {
    host: SshHost,
}

impl Ssh {
    /// The executor for a step's `{"ssh": {"host", "dir"}}`.
    pub fn new(spec: &SshSpec) -> Result<Self, ExecError> {
        SshHost::new(&spec.host, spec.dir.as_deref())
            .map(|host| Self { host })
            .map_err(|e| ExecError(e.to_string()))
    }

    /// The executor for a host set up elsewhere (a test's client options).
    pub fn with_host(host: SshHost) -> Self {
        Self { host }
    }
}

impl Executor for Ssh {
    fn name(&self) -> &'static str {
        "ssh"
    }

    fn start<'a>(
        &'a self,
        launch: &'a Launch,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>> {
        Box::pin(async move {
            let mut env = launch.env.clone();
            let script = match &launch.program {
                Program::Shell(s) => s.clone(),
                Program::Argv(argv) if argv.is_empty() => {
                    return Err(ExecError("the command line is empty".into()));
                }
                Program::Argv(argv) => argv_script(argv, &mut env.vars),
            };
            if !env.vars.iter().any(|(k, _)| k == "BATON_EXECUTION_KEY")
                && !launch.labels.execution_key.is_empty()
            {
                env.vars.push((
                    "BATON_EXECUTION_KEY".into(),
                    launch.labels.execution_key.clone(),
                ));
            }
            start_ssh(&self.host, &script, &env, log)
                .await
                .map(|s| Box::new(s) as Box<dyn Started>)
                .map_err(ExecError)
        })
    }

    /// Nothing to find: the host ends a step when the connection that started it closes, so
    /// a step never outlives its engine; recovery marks it interrupted and a resume runs it
    /// again.
    fn find<'a>(
        &'a self,
        _labels: &'a Labels,
        _log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async { Ok(Found::Gone) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_travels_in_variables_not_in_the_script() {
        let argv = vec!["claude".to_string(), "it's $(id)".to_string()];
        let mut vars = vec![("A".to_string(), "b".to_string())];
        let script = argv_script(&argv, &mut vars);
        assert_eq!(script, r#"exec "$BATON_ARGV_0" "$BATON_ARGV_1""#);
        assert_eq!(
            vars[2],
            ("BATON_ARGV_1".to_string(), "it's $(id)".to_string())
        );
    }
}
