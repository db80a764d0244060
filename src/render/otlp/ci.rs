//! The CI run a recording was made in, from the variables GitHub Actions,
//! GitLab CI, Buildkite and Jenkins set: the `cicd.pipeline.*` and `vcs.*`
//! attributes of the semantic conventions, and a trace id every job of one
//! pipeline run derives alike.

use super::{fnv1a, text, KeyValue};

/// One CI run, as its system names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ci {
    /// `github`, `gitlab`, `buildkite` or `jenkins`.
    pub system: &'static str,
    /// `cicd.pipeline.name`: the workflow, project or job.
    pub pipeline: Option<String>,
    /// `cicd.pipeline.run.id`.
    pub run_id: String,
    /// Which attempt of the run (GitHub's re-runs); empty elsewhere.
    pub attempt: String,
    /// `cicd.pipeline.task.name`: the job or step.
    pub task: Option<String>,
    /// `cicd.pipeline.task.run.id`.
    pub task_run_id: Option<String>,
    /// `vcs.ref.head.revision`.
    pub revision: Option<String>,
    /// `vcs.ref.head.name`.
    pub branch: Option<String>,
    /// `vcs.repository.url.full`.
    pub repository: Option<String>,
}

impl Ci {
    /// The CI run the variables `var` reads describe, if any.
    pub fn detect(var: &dyn Fn(&str) -> Option<String>) -> Option<Ci> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let is = |name: &str| var(name).as_deref() == Some("true");
        if is("GITHUB_ACTIONS") {
            let repository = set("GITHUB_REPOSITORY").map(|repo| {
                let server = set("GITHUB_SERVER_URL");
                format!(
                    "{}/{repo}",
                    server.as_deref().unwrap_or("https://github.com")
                )
            });
            return Some(Ci {
                system: "github",
                pipeline: set("GITHUB_WORKFLOW"),
                run_id: set("GITHUB_RUN_ID")?,
                attempt: set("GITHUB_RUN_ATTEMPT").unwrap_or_default(),
                task: set("GITHUB_JOB"),
                task_run_id: None,
                revision: set("GITHUB_SHA"),
                branch: set("GITHUB_REF_NAME"),
                repository,
            });
        }
        if is("GITLAB_CI") {
            return Some(Ci {
                system: "gitlab",
                pipeline: set("CI_PIPELINE_NAME").or_else(|| set("CI_PROJECT_PATH")),
                run_id: set("CI_PIPELINE_ID")?,
                attempt: String::new(),
                task: set("CI_JOB_NAME"),
                task_run_id: set("CI_JOB_ID"),
                revision: set("CI_COMMIT_SHA"),
                branch: set("CI_COMMIT_REF_NAME"),
                repository: set("CI_PROJECT_URL"),
            });
        }
        if is("BUILDKITE") {
            return Some(Ci {
                system: "buildkite",
                pipeline: set("BUILDKITE_PIPELINE_SLUG"),
                run_id: set("BUILDKITE_BUILD_ID")?,
                attempt: String::new(),
                task: set("BUILDKITE_LABEL"),
                task_run_id: set("BUILDKITE_JOB_ID"),
                revision: set("BUILDKITE_COMMIT"),
                branch: set("BUILDKITE_BRANCH"),
                repository: set("BUILDKITE_REPO"),
            });
        }
        // Jenkins numbers builds per job: the job is part of the run.
        set("JENKINS_URL")?;
        Some(Ci {
            system: "jenkins",
            pipeline: set("JOB_NAME"),
            run_id: set("BUILD_NUMBER")?,
            attempt: String::new(),
            task: set("STAGE_NAME"),
            task_run_id: None,
            revision: set("GIT_COMMIT"),
            branch: set("GIT_BRANCH"),
            repository: set("GIT_URL"),
        })
    }

    /// The trace of the whole run: FNV-1a (128 bits) of
    /// `proctrace\n<system>\n<pipeline>\n<run id>\n<attempt>`, so every job
    /// of one run (and of one re-run attempt) lands in one trace.
    pub fn trace_id(&self) -> [u8; 16] {
        let pipeline = self.pipeline.as_deref().unwrap_or_default();
        let key = format!(
            "proctrace\n{}\n{pipeline}\n{}\n{}",
            self.system, self.run_id, self.attempt
        );
        fnv1a(&[key.as_bytes()]).to_be_bytes()
    }

    /// The resource attributes of the run.
    pub(super) fn attributes(&self) -> Vec<KeyValue<'static>> {
        let all = [
            ("cicd.pipeline.name", self.pipeline.clone()),
            ("cicd.pipeline.run.id", Some(self.run_id.clone())),
            ("cicd.pipeline.task.name", self.task.clone()),
            ("cicd.pipeline.task.run.id", self.task_run_id.clone()),
            ("vcs.ref.head.revision", self.revision.clone()),
            ("vcs.ref.head.name", self.branch.clone()),
            ("vcs.repository.url.full", self.repository.clone()),
            ("proctrace.ci.system", Some(self.system.to_string())),
            (
                "proctrace.ci.attempt",
                Some(self.attempt.clone()).filter(|a| !a.is_empty()),
            ),
        ];
        let set = all
            .into_iter()
            .filter_map(|(key, value)| Some((key, value?)));
        set.map(|(key, value)| KeyValue::new(key, text(value)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            let found = pairs.iter().find(|(key, _)| *key == name);
            found.map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn github_jobs_of_one_run_share_a_trace_and_a_rerun_does_not() {
        let job = |name, attempt| {
            let vars = [
                ("GITHUB_ACTIONS", "true"),
                ("GITHUB_WORKFLOW", "ci"),
                ("GITHUB_RUN_ID", "42"),
                ("GITHUB_RUN_ATTEMPT", attempt),
                ("GITHUB_JOB", name),
                ("GITHUB_REPOSITORY", "o/r"),
            ];
            let ci = Ci::detect(&env(&vars));
            ci.unwrap()
        };
        let (a, b) = (job("build", "1"), job("test", "1"));
        assert_eq!(a.task.as_deref(), Some("build"));
        assert_eq!(a.repository.as_deref(), Some("https://github.com/o/r"));
        assert_eq!(a.trace_id(), b.trace_id());
        assert_ne!(a.trace_id(), job("build", "2").trace_id());
        // Written down in docs/guide.md ("The trace id of a CI run"): anyone can
        // derive it again.
        assert_eq!(
            crate::event::to_hex(&a.trace_id()),
            format!("{:032x}", fnv1a(&[b"proctrace\ngithub\nci\n42\n1"]))
        );
    }

    #[test]
    fn each_ci_system_is_recognised_and_none_outside_ci() {
        let gitlab = [
            ("GITLAB_CI", "true"),
            ("CI_PIPELINE_ID", "7"),
            ("CI_JOB_ID", "9"),
        ];
        let gitlab = Ci::detect(&env(&gitlab)).unwrap();
        assert_eq!(
            (gitlab.system, gitlab.task_run_id.as_deref()),
            ("gitlab", Some("9"))
        );
        let buildkite = [("BUILDKITE", "true"), ("BUILDKITE_BUILD_ID", "b")];
        assert_eq!(Ci::detect(&env(&buildkite)).unwrap().system, "buildkite");
        let jenkins = [
            ("JENKINS_URL", "http://j/"),
            ("BUILD_NUMBER", "3"),
            ("JOB_NAME", "x"),
        ];
        assert_eq!(
            Ci::detect(&env(&jenkins)).unwrap().pipeline.as_deref(),
            Some("x")
        );
        assert_eq!(Ci::detect(&env(&[("HOME", "/root")])), None);
    }
}
