// The projects list as the page shows it, as pure functions: one row per project of the
// `projects` root (docs/document-schema.md), live ones first, with its leader and members by
// name, its tasks' progress and whether it can still be disbanded; and the label of the group
// prompt control for the selected fairies. No DOM, no network: `fairypanel.ts` draws the rows.
import { isLiveProject, type Project, type Task } from '@fairyring/client'

/** One project as the list shows it. */
export interface ProjectRow {
  id: string
  title: string
  status: string
  color: string
  /** Member names, the leader first and marked "(leads)". */
  members: string[]
  /** `done/total` of its tasks, or '' before it has any. */
  progress: string
  /** Whether it is live (planning or active): only then is there a disband button. */
  live: boolean
}

/** Ended projects shown under the live ones (the newest are not known: the first by title). */
export const ENDED_SHOWN = 5

/** The rows of the projects list: live projects, then up to `ENDED_SHOWN` ended ones. */
export function projectRows (projects: readonly Project[], tasks: readonly Task[], names: ReadonlyMap<string, string>): ProjectRow[] {
  const row = (p: Project): ProjectRow => {
    const leader = p.orchestratorId !== '' ? p.orchestratorId : p.members[0] ?? ''
    const order = [leader, ...p.members.filter(m => m !== leader)].filter(m => m !== '')
    const mine = tasks.filter(t => t.projectId === p.id)
    const done = mine.filter(t => t.status === 'done').length
    // `tasks` read with the projects (`readTasks`): an aborted project's unfinished tasks say so.
    return {
      id: p.id,
      title: p.title,
      status: p.status !== '' ? p.status : 'planning',
      color: p.color,
      members: order.map(m => `${names.get(m) ?? m}${m === leader ? ' (leads)' : ''}`),
      progress: mine.length > 0 ? `${done}/${mine.length} tasks done` : '',
      live: isLiveProject(p.status)
    }
  }
  const live = projects.filter(p => isLiveProject(p.status)).map(row)
  const ended = projects.filter(p => !isLiveProject(p.status)).slice(0, ENDED_SHOWN).map(row)
  return [...live, ...ended]
}

/**
 * The group prompt control's label for the selected fairies (in selection order, the first
 * leads), or `null` when fewer than two are selected (then it is hidden).
 */
export function groupPromptLabel (selectedNames: readonly string[]): string | null {
  const [leader, ...rest] = selectedNames
  if (leader === undefined || rest.length === 0) return null
  return `Start a project with ${selectedNames.length} fairies (${leader} leads)`
}
