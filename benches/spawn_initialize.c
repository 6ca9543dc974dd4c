// Spawn -> initialize answered for `agent-discover mcp` (issue 31): N runs of fork/exec with pipes, the initialize
// request written at once, the time until its response line; prints min, p50 and p90.
// Build and run: cc -O1 -o /tmp/spawn_initialize benches/spawn_initialize.c &&
//   AGENT_DISCOVER_DASHBOARD=on /tmp/spawn_initialize target/release/agent-discover DATA_DIR 40
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){int n=atoi(v[3]);double ts[200];
 const char*init="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"m\",\"version\":\"1\"}}}\n";
 for(int i=0;i<n;i++){int in[2],out[2];pipe(in);pipe(out);double t0=now();pid_t p=fork();
  if(!p){dup2(in[0],0);dup2(out[1],1);int dn=open("/dev/null",1);dup2(dn,2);close(in[1]);close(out[0]);execl(v[1],v[1],"--data-dir",v[2],"mcp",(char*)0);_exit(127);}
  close(in[0]);close(out[1]);write(in[1],init,strlen(init));char buf[8192];int got=0;while(1){int r=read(out[0],buf+got,sizeof buf-got);if(r<=0)break;got+=r;if(memchr(buf,'\n',got))break;}
  ts[i]=now()-t0;close(in[1]);close(out[0]);waitpid(p,0,0);}
 qsort(ts,n,sizeof(double),cmp);printf("min %.2f p50 %.2f p90 %.2f ms\n",ts[0],ts[n/2],ts[n*9/10]);}
