// The control plane of a multi-process job: one ControlServer inside rank 0's process and one
// ControlClient per rank, over authenticated TCP. It does rendezvous (a key-value store with
// blocking Get), atomic counters, named barriers and failure detection (heartbeats both ways;
// a dead, silent or aborting rank fails the job on every other rank with a message naming it).
//
//   ControlOptions options;
//   options.job_token = token;  options.world_size = world;  options.master_address = address;
//   std::unique_ptr<ControlServer> server;
//   if (rank == 0) { ASSIGN_OR_RETURN(server, ControlServer::Start(options)); }
//   options.master_port = rank == 0 ? server->port() : port_from_launcher;
//   ASSIGN_OR_RETURN(auto client, ControlClient::Connect(options, rank, LocalHostName()));
//   RETURN_IF_ERROR(client->Barrier("start", 60000));
//
// See control_server.h and control_client.h for the contracts (errors, thread-safety) and
// control_wire.h for the bytes on the wire.
#ifndef ONEFLOW_LIKE_COMM_CONTROL_PLANE_H_
#define ONEFLOW_LIKE_COMM_CONTROL_PLANE_H_

#include "oneflow_like/comm/control_client.h"
#include "oneflow_like/comm/control_server.h"
#include "oneflow_like/comm/control_wire.h"

#endif  // ONEFLOW_LIKE_COMM_CONTROL_PLANE_H_
