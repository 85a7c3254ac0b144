// Growing a job back: `xtrain launch` asks the ranks of an attempt that runs on fewer nodes than
// it wants (after a lost node, with no spare) to stop once a node has joined, so that the next
// attempt starts on more nodes from their checkpoint (launch/node_membership.h). It asks by
// creating the file named in the ranks' environment (launch::kRegroupFileVariable); other
// launchers never ask. The ranks agree at each periodic checkpoint (one all-reduce there), save
// it as usual, and stop with kExitStopped; the global batch stays the recipe's, so the next
// attempt reads on from the same sample with more ranks.
#pragma once

namespace xtrain::train {

// True when this rank's launcher has asked for a regroup (one stat).
bool regroup_requested();

// Rank 0, once every rank has saved and is stopping for the regroup: removes the file, which
// tells the launcher (on rank 0's node) that the ranks stopped for it, not for a stop signal or
// a STOP file at the same step.
void take_regroup_request();

}  // namespace xtrain::train
